"""Print README.md's two opening commands, one a line: the first fenced bash block, which must
hold exactly two (the first installs and runs the headline, the second installs and runs the
tests). CI runs what this prints, so it can never drift from what a new user reads."""

import sys
from pathlib import Path


def opening_commands(readme: str) -> list[str]:
    lines = readme.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "```bash")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
    commands = [line.strip() for line in lines[start + 1:end]
                if line.strip() and not line.strip().startswith("#")]
    if len(commands) != 2:
        sys.exit(f"README.md's first bash block holds {len(commands)} commands; expected 2")
    return commands


if __name__ == "__main__":
    print("\n".join(opening_commands(Path(sys.argv[1]).read_text(encoding="utf-8"))))
