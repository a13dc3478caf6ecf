"""The entry point before app.py; nothing imports it."""
