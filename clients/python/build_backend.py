"""The package's PEP 517 build backend, standard library only, so that
`pip install ./clients/python` needs nothing from an index (setuptools
would need itself and, before 70.1, `wheel` downloaded or installed).

It builds a pure-Python wheel of the ctxcompact/ folder, an editable
wheel (a .pth naming this folder) and an sdist, with the metadata of
pyproject.toml's [project] table (the simple `key = "value"` and list
lines this file has).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = "ctxcompact"


def _project() -> Dict[str, object]:
    with open(os.path.join(_HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    table = re.search(r"(?ms)^\[project\]\n(.*?)(?=^\[|\Z)", text)
    if table is None:
        raise RuntimeError("pyproject.toml has no [project] table")
    out: Dict[str, object] = {}
    for key, value in re.findall(r'(?ms)^([\w-]+) = (".*?"|\[.*?\])\s*$', table.group(1)):
        out[key] = re.findall(r'"([^"]*)"', value) if value.startswith("[") else value[1:-1]
    return out


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"],
             "Summary: %s" % p.get("description", ""), "Requires-Python: %s" % p.get("requires-python", "")]
    lines += ["Classifier: %s" % c for c in p.get("classifiers", [])]  # type: ignore[union-attr]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(_HERE, str(p.get("readme", "README.md"))), encoding="utf-8") as f:
        return "\n".join(lines) + "\n\n" + f.read()


def _files() -> List[Tuple[str, str]]:
    """The package's files: (path in the wheel, path on disk)."""
    out = []
    root = os.path.join(_HERE, _PACKAGE)
    for name in sorted(os.listdir(root)):
        if name.endswith(".py") or name == "py.typed":
            out.append((_PACKAGE + "/" + name, os.path.join(root, name)))
    return out


def _wheel(wheel_directory: str, contents: List[Tuple[str, bytes]]) -> str:
    p = _project()
    name, version = str(p["name"]), str(p["version"])
    info = "%s-%s.dist-info" % (name, version)
    contents = contents + [
        (info + "/METADATA", _metadata().encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: ctxcompact build_backend\nRoot-Is-Purelib: true\n"
                          b"Tag: py3-none-any\n"),
    ]
    record = []
    for path, data in contents:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    record.append(info + "/RECORD,,")
    contents.append((info + "/RECORD", ("\n".join(record) + "\n").encode("utf-8")))
    filename = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in contents:
            z.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return filename


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    contents = []
    for arc, path in _files():
        with open(path, "rb") as f:
            contents.append((arc, f.read()))
    return _wheel(wheel_directory, contents)


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _wheel(wheel_directory, [(_PACKAGE + ".pth", (_HERE + "\n").encode("utf-8"))])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    base = "%s-%s" % (p["name"], p["version"])
    names = ["pyproject.toml", "README.md", "build_backend.py"] + [path for _, path in _files()]
    with tarfile.open(os.path.join(sdist_directory, base + ".tar.gz"), "w:gz") as t:
        for path in names:
            full = path if os.path.isabs(path) else os.path.join(_HERE, path)
            t.add(full, arcname=base + "/" + os.path.relpath(full, _HERE))
        pkg_info = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return base + ".tar.gz"


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []
