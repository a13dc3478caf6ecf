import re
import sys
from pathlib import Path


def words(text):
    return re.findall(r"[a-z]+", text.lower())


expected, path = sys.argv[1].lower(), Path(sys.argv[2])
answer = words(path.read_text()) if path.is_file() else []
if answer == [expected]:
    print(1.0)
elif expected in answer and len(answer) <= 12 and answer.count(expected) == 1:
    print(0.25)
else:
    print(0.0)
