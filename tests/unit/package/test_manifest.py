"""The package manifest against the real coreutils `sha256sum`, byte for byte.

The manifest's whole point is that a stranger can check a package with `sha256sum -c`, so the
tests run the real tool instead of trusting our reading of its format.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from console.package.manifest import (
    CHUNK_SIZE,
    MANIFEST_NAME,
    build_manifest,
    format_line,
    hash_file,
    parse_line,
    verify,
    write_manifest,
)

pytestmark = pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils")

PLAIN = {
    "run.json": b'{"unit": "sglang.service"}\n',
    "a/b/c.txt": b"deep\n",
    "a/b2.txt": b"b2\n",
    "a/B.txt": b"upper sorts first in byte order\n",
    "with space.txt": b"spaced\n",
    "\u00fcn\u00efc\u00f8d\u00e9/\u0444\u0430\u0439\u043b.bin": bytes(range(256)),
    "empty": b"",
    "sub/MANIFEST.sha256": b"a nested manifest is just a file\n",
    # Crosses the 1 MiB read size, so chunking is exercised.
    "big.bin": os.urandom(3 * CHUNK_SIZE + 17),
}
ODD = {
    "new\nline.txt": b"newline\n",
    "back\\slash.txt": b"backslash\n",
    "cr\rname": b"carriage return\n",
    "both\\and\nnl\r": b"all three\n",
    "dir\\x/inner\nfile": b"escaped directory\n",
    "-leading-dash": b"dash\n",
    "-": b"a file named dash\n",
    os.fsdecode(b"latin1-\xe9.txt"): b"not utf-8\n",
}


def _make(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


@pytest.fixture
def plain_pkg(tmp_path: Path) -> Path:
    return _make(tmp_path / "pkg", PLAIN)


@pytest.fixture
def odd_pkg(tmp_path: Path) -> Path:
    return _make(tmp_path / "pkg", PLAIN | ODD)


def _coreutils_manifest(root: Path, extra_find: str = "") -> bytes:
    """What coreutils writes for the package (names as `find -printf %P` gives them).

    `-path ./MANIFEST` rather than `-name`: only the root manifest is excluded, a nested one
    (e.g. a copied sub-package) is an ordinary file. `--` protects names starting with '-'.
    """
    script = (
        "set -euo pipefail; "
        f"find . -type f ! -path ./{MANIFEST_NAME} {extra_find} -printf '%P\\0' "
        "| LC_ALL=C sort -z | xargs -0 sha256sum --"
    )
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    return result.stdout


def _sha256sum_check(root: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["sha256sum", "--strict", "-c", MANIFEST_NAME],
        cwd=root,
        stdin=subprocess.DEVNULL,  # a bare "-" entry would read this instead of the file
        capture_output=True,
    )


def test_hash_file_matches_hashlib_and_coreutils(plain_pkg: Path) -> None:
    path = plain_pkg / "big.bin"
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    assert hash_file(path) == expected
    out = subprocess.run(["sha256sum", path], capture_output=True, check=True).stdout
    assert out.split()[0].decode() == expected


def test_plain_names_match_find_sort_xargs_byte_for_byte(plain_pkg: Path) -> None:
    assert write_manifest(plain_pkg)
    ours = (plain_pkg / MANIFEST_NAME).read_bytes()
    assert ours == _coreutils_manifest(plain_pkg)
    lines = ours.decode().splitlines()
    assert len(lines) == len(PLAIN)
    assert not any("./" in line for line in lines)
    assert lines[0].endswith("  a/B.txt")  # 'B' (0x42) sorts before 'b' (0x62)


def test_odd_names_are_escaped_exactly_like_coreutils(odd_pkg: Path) -> None:
    ours = os.fsencode(build_manifest(odd_pkg))
    # A bare "-" makes sha256sum read stdin, so coreutils cannot be asked about that file;
    # every other line must be identical.
    theirs = _coreutils_manifest(odd_pkg, extra_find="! -path ./-")
    dash_line = f"{hash_file(odd_pkg / '-')}  ./-\n".encode()
    assert dash_line in ours.splitlines(keepends=True)
    assert ours.replace(dash_line, b"") == theirs
    all_three = hashlib.sha256(b"all three\n").hexdigest().encode()
    assert b"\\" + all_three + b"  both\\\\and\\nnl\\r\n" in ours


def test_real_sha256sum_checks_every_file_ok(odd_pkg: Path) -> None:
    write_manifest(odd_pkg)
    result = _sha256sum_check(odd_pkg)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    # Split on LF only: a name with a raw CR is printed unescaped in -c output.
    reported = result.stdout.removesuffix(b"\n").split(b"\n")
    assert len(reported) == len(PLAIN) + len(ODD)
    assert all(line.endswith(b": OK") for line in reported)


def test_real_sha256sum_reads_escaped_lines_as_the_right_files(odd_pkg: Path) -> None:
    write_manifest(odd_pkg)
    (odd_pkg / "new\nline.txt").write_bytes(b"tampered\n")
    (odd_pkg / "-").write_bytes(b"tampered too\n")
    result = _sha256sum_check(odd_pkg)
    assert result.returncode == 1
    failed = [line for line in result.stdout.split(b"\n") if line.endswith(b": FAILED")]
    assert sorted(failed) == [b"./-: FAILED", b"\\new\\nline.txt: FAILED"]


def test_build_is_deterministic_and_unchanged_package_is_not_rewritten(odd_pkg: Path) -> None:
    assert build_manifest(odd_pkg) == build_manifest(odd_pkg)
    manifest = odd_pkg / MANIFEST_NAME
    assert write_manifest(odd_pkg) is True
    before = manifest.stat()
    # Timestamps are not content: touching a file must not change the manifest.
    os.utime(odd_pkg / "run.json", ns=(1, 1))
    assert write_manifest(odd_pkg) is False
    after = manifest.stat()
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)

    (odd_pkg / "run.json").write_bytes(b"{}\n")
    assert write_manifest(odd_pkg) is True
    assert manifest.read_bytes() == os.fsencode(build_manifest(odd_pkg))
    assert not [p for p in os.listdir(odd_pkg) if p.endswith(".part")]


def test_written_manifest_is_sorted_by_raw_bytes_and_newline_terminated(odd_pkg: Path) -> None:
    write_manifest(odd_pkg)
    raw = (odd_pkg / MANIFEST_NAME).read_bytes()
    assert raw.endswith(b"\n")
    rels = [parse_line(os.fsdecode(line))[1] for line in raw.removesuffix(b"\n").split(b"\n")]
    assert rels == sorted(rels, key=os.fsencode)
    assert set(rels) == set(PLAIN) | set(ODD)


def test_symlinks_part_files_and_special_files_are_skipped(plain_pkg: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"not part of the package\n")
    (plain_pkg / "link-to-file").symlink_to(outside / "secret")
    (plain_pkg / "link-to-dir").symlink_to(outside, target_is_directory=True)
    (plain_pkg / "a" / "model.safetensors.part").write_bytes(b"half a download")
    os.mkfifo(plain_pkg / "fifo")
    (plain_pkg / "empty-dir").mkdir()

    text = build_manifest(plain_pkg)
    for name in ("link", "secret", ".part", "fifo", "empty-dir"):
        assert name not in text
    write_manifest(plain_pkg)
    report = verify(plain_pkg)
    assert report.clean
    assert report.unlisted == ()


def test_verify_clean_package_lists_every_file_ok(odd_pkg: Path) -> None:
    write_manifest(odd_pkg)
    report = verify(odd_pkg)
    assert report.clean
    assert set(report.ok) == set(PLAIN) | set(ODD)
    assert list(report.ok) == sorted(report.ok, key=os.fsencode)


def test_verify_reports_modified_deleted_and_extra_files(odd_pkg: Path) -> None:
    write_manifest(odd_pkg)
    (odd_pkg / "a/b/c.txt").write_bytes(b"changed\n")
    (odd_pkg / "back\\slash.txt").unlink()
    (odd_pkg / "a/new file.txt").write_bytes(b"extra\n")
    (odd_pkg / "extra\nname").write_bytes(b"extra\n")
    (odd_pkg / "ignored.part").write_bytes(b"in flight\n")

    report = verify(odd_pkg)
    assert not report.clean
    assert report.mismatched == ("a/b/c.txt",)
    assert report.missing == ("back\\slash.txt",)
    assert report.unlisted == ("a/new file.txt", "extra\nname")
    assert report.malformed == ()
    assert len(report.ok) == len(PLAIN) + len(ODD) - 2


def test_verify_reports_malformed_lines(plain_pkg: Path) -> None:
    write_manifest(plain_pkg)
    good = (plain_pkg / MANIFEST_NAME).read_text()
    digest = hash_file(plain_pkg / "empty")
    bad = [
        "not a checksum line",
        f"{digest[:-1]}  short-hash",
        f"{digest[:-1]}g  bad-hex",
        f"{digest} one-space",
        f"\\{digest}  bad\\tescape",
        f"\\{digest}  trailing\\",
        f"{digest}  ../outside",
        f"{digest}  /etc/passwd",
        f"{digest}  empty",  # duplicate of a good line
        f"{digest}  {MANIFEST_NAME}",
        f"{digest}  x.part",
        f"{digest}  ",
    ]
    (plain_pkg / MANIFEST_NAME).write_text(good + "\n# a comment\n" + "\n".join(bad) + "\n")

    report = verify(plain_pkg)
    assert not report.clean
    assert [m.text for m in report.malformed] == bad
    first_bad = len(good.splitlines()) + 3  # good lines, blank, comment
    assert [m.lineno for m in report.malformed] == list(range(first_bad, first_bad + len(bad)))
    assert report.malformed[-6].reason == "path leaves the package"
    assert report.malformed[-4].reason == "duplicate entry"
    assert set(report.ok) == set(PLAIN)
    assert (report.mismatched, report.missing, report.unlisted) == ((), (), ())


def test_verify_never_reads_through_a_symlink(plain_pkg: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"outside\n")
    (plain_pkg / "link").symlink_to(secret)
    write_manifest(plain_pkg)
    with (plain_pkg / MANIFEST_NAME).open("a") as f:
        f.write(format_line(hash_file(secret), "link"))
    assert verify(plain_pkg).missing == ("link",)


def test_verify_accepts_coreutils_variants(plain_pkg: Path) -> None:
    # find-style "./" prefixes, uppercase hex, binary-mode '*' and CRLF endings all name the
    # same files, as they do for sha256sum -c.
    lines = []
    for i, raw in enumerate(_coreutils_manifest(plain_pkg).splitlines()):
        digest, name = raw[:64].decode(), raw[66:]
        digest = digest.upper() if i % 2 else digest
        mode = b"*" if i % 3 == 0 else b" "
        lines.append(digest.encode() + b" " + mode + b"./" + name + b"\r\n")
    (plain_pkg / MANIFEST_NAME).write_bytes(b"".join(lines))
    assert _sha256sum_check(plain_pkg).returncode == 0
    report = verify(plain_pkg)
    assert report.clean
    assert set(report.ok) == set(PLAIN)


def test_verify_without_manifest_raises(plain_pkg: Path) -> None:
    with pytest.raises(FileNotFoundError):
        verify(plain_pkg)
