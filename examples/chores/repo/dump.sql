dump.sql
