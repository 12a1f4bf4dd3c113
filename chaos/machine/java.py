"""Finding a Java 17+ runtime, which Spark needs; a missing one is a user error with a fix."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from chaos.errors import UserError

FIX = "install OpenJDK 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"


def java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def java_version(binary: str) -> int | None:
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match[1])
    return int(match[2]) if major == 1 and match[2] else major


def require_java() -> str:
    """Return the java binary, or raise a one-line UserError saying how to get one."""
    binary = java_binary()
    if binary is None:
        raise UserError(f"no Java found (Spark needs Java 17+): {FIX}")
    version = java_version(binary)
    if version is None:
        raise UserError(f"{binary} does not run or print a version: {FIX}")
    if version < 17:
        raise UserError(f"{binary} is Java {version}, Spark 4 needs 17+: {FIX}")
    return binary
