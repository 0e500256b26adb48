"""Every ```python block of README.md and docs/*.md runs, and the documents' links resolve.

Each document's python blocks run in order in one namespace, in an empty temporary working
directory. A block is not run when the line before its fence (blank lines aside) is
``<!-- snippet: skip REASON -->``; keep that for what truly cannot run here (docker, other
hosts). A ```bash block runs only when the line before its fence is
``<!-- snippet: run -->``: a document's marked blocks run in order in one bash script against
the real service (one for every document), every curl answering 2xx; each bash block of
docs/ is marked to run or to be skipped, with the reason.

A document whose blocks talk to ``http://127.0.0.1:8000`` (or ``localhost:8000``, or the
README's second service, ``127.0.0.1:8001``) gets the real service on a loopback port for
its blocks (``tests/support/live_server.py``), and that URL is put in their place; one whose
blocks name ``redis://127.0.0.1:6379/0`` gets a service on the Redis backend, with the test
database (``FEATUREBUDGET_TEST_REDIS_URL``, flushed before and after) put in its place;
without Redis those blocks are left out and the others run on the embedded backend. Either
service runs the batch worker in-process, so batch models retrain as on the embedded
default.

``docs/api.md`` must name every route of the app's OpenAPI document (``METHOD /path``), and
``docs/operations.md`` every setting (``FEATUREBUDGET_<NAME>``).
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SERVICE_URLS = ("http://127.0.0.1:8000", "http://localhost:8000",
                "http://127.0.0.1:8001")  # the README's service on Redis, beside the first
DOC_REDIS_URL = "redis://127.0.0.1:6379/0"
TEST_REDIS_URL = os.environ.get("FEATUREBUDGET_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
_SKIP = re.compile(r"^<!--\s*snippet:\s*skip\b\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    language: str
    code: str
    line: int  # 1-based line of the opening fence
    skip: str | None  # the reason, when marked


def fenced_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a markdown text, with their skip markers."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i].strip())
        if not match:
            i += 1
            continue
        fence, language = match.group(1), match.group(2).lower()
        indent = len(lines[i]) - len(lines[i].lstrip())
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()),
                      "")
        marker = _SKIP.match(before)
        start, i = i, i + 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        blocks.append(Block(language, textwrap.dedent("\n".join(body)) + "\n", start + 1,
                            (marker.group(1) or "no reason given") if marker else None))
        i += 1
    return blocks


def _python_blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [b for b in fenced_blocks(text) if b.language in ("python", "py")]


def _redis_available() -> bool:
    import redis

    try:
        client = redis.Redis.from_url(TEST_REDIS_URL, socket_connect_timeout=1)
        client.ping()
        client.close()
        return True
    except redis.RedisError:
        return False


def _params():
    out = []
    for path in DOCUMENTS:
        blocks = [b for b in _python_blocks(path) if b.skip is None]
        if not blocks:
            continue
        marks = [pytest.mark.redis] if any("redis://" in b.code for b in blocks) else []
        out.append(pytest.param(path, id=str(path.relative_to(ROOT)), marks=marks))
    return out


@pytest.mark.parametrize("path", _params())
def test_python_snippets_run(path: Path, tmp_path, monkeypatch):
    from service.settings import Settings
    from tests.support.live_server import live_server

    blocks = [b for b in _python_blocks(path) if b.skip is None]
    everything = "".join(b.code for b in blocks)
    needs_redis = "redis://" in everything
    needs_server = needs_redis or any(url in everything for url in SERVICE_URLS)
    for found in set(re.findall(r"redis://[^\s\"')]+", everything)) - {DOC_REDIS_URL}:
        pytest.fail(f"{path.name}: snippets use {found}; name {DOC_REDIS_URL} so the test "
                    "can point them at its own database")
    redis_client = None
    if needs_redis and not _redis_available():  # the others still run, on the embedded backend
        blocks = [b for b in blocks if "redis://" not in b.code]
        needs_redis = False
        if not blocks:
            pytest.skip(f"no Redis server at {TEST_REDIS_URL} (set "
                        "FEATUREBUDGET_TEST_REDIS_URL)")
    if needs_redis:
        import redis

        redis_client = redis.Redis.from_url(TEST_REDIS_URL)
        redis_client.flushdb()
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    settings = Settings(redis_url=TEST_REDIS_URL if needs_redis else None,
                        data_dir=tmp_path / "data", api_keys="", batch_worker=True,
                        consumer_block_ms=20, job_poll_seconds=0.05)
    try:
        if needs_server:
            with live_server(settings) as url:
                _run(path, blocks, url)
        else:
            _run(path, blocks, None)
    finally:
        if redis_client is not None:
            redis_client.flushdb()
            redis_client.close()


def _run(path: Path, blocks: list[Block], url: str | None) -> None:
    namespace: dict = {"__name__": "__snippets__"}
    for block in blocks:
        code = block.code
        if url is not None:
            for documented in SERVICE_URLS:
                code = code.replace(documented, url)
            code = code.replace(DOC_REDIS_URL, TEST_REDIS_URL)
        where = f"{path.relative_to(ROOT)}, the python block at line {block.line}"
        try:
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 - our own documents
        except Exception as exc:
            raise AssertionError(f"{where} failed: {type(exc).__name__}: {exc}\n\n"
                                 f"{block.code}") from exc


# ---------------------------------------------------------------------- the runner itself
def test_fenced_blocks_and_skip_markers():
    text = textwrap.dedent("""\
        # Title
        ```python
        a = 1
        ```
        <!-- snippet: skip needs docker -->

        ```python
        raise SystemExit
        ```
        ```bash
        echo no
        ```
        - item:
          ```py
          b = a + 1
          ```
        """)
    blocks = fenced_blocks(text)
    assert [(b.language, b.line, b.skip) for b in blocks] == [
        ("python", 2, None), ("python", 7, "needs docker"), ("bash", 10, None),
        ("py", 14, None)]
    assert blocks[0].code == "a = 1\n" and blocks[3].code == "b = a + 1\n"


def test_a_failing_snippet_names_its_document_and_line(tmp_path):
    blocks = fenced_blocks("```python\nx = 1\n```\n\n```python\nx / 0\n```\n")
    with pytest.raises(AssertionError, match=r"README.md, the python block at line 5 failed: "
                                             r"ZeroDivisionError"):
        _run(ROOT / "README.md", blocks, None)


# ---------------------------------------------------------------------- api.md and links
def test_api_reference_names_every_route():
    from service.app import create_app

    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [f"{method.upper()} {route}"
               for route, item in create_app().openapi()["paths"].items()
               for method in item if f"{method.upper()} {route}" not in text]
    assert not missing, f"docs/api.md does not document {missing}"


def test_operations_guide_names_every_setting():
    from service.settings import Settings

    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    missing = [f"FEATUREBUDGET_{name.upper()}" for name in Settings.model_fields
               if f"FEATUREBUDGET_{name.upper()}" not in text]
    assert not missing, f"docs/operations.md does not document {missing}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    headings = [line.lstrip("#").strip() for line in text.splitlines()
                if re.match(r"^#{1,6} ", line)]
    return {_slug(h) for h in headings}


@pytest.mark.parametrize("path", DOCUMENTS, ids=[str(p.relative_to(ROOT)) for p in DOCUMENTS])
def test_relative_links_resolve(path: Path):
    text = path.read_text(encoding="utf-8")
    without_code = "\n".join(b for i, b in enumerate(re.split(r"^```.*$", text, flags=re.M))
                             if i % 2 == 0)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", without_code):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        missing_anchor = bool(anchor) and linked.suffix == ".md" and linked.exists() and \
            anchor not in _anchors(linked)
        if not linked.exists() or missing_anchor:
            broken.append(target)
    assert not broken, f"{path.name}: broken links {broken}"


# ---------------------------------------------------------------------- model names
_CREATE = [re.compile(r"\bcreate(?:_batch)?_model\(\s*\"([^\"]+)\""),   # the Python client
           re.compile(r"featurebudget models create\s+([\w.-]+)"),
           re.compile(r"-X POST \S*/v1/models\s[^`]*?\"name\":\s*\"([^\"]+)\"")]   # curl
_DELETE = r"(?:-X DELETE\s+\S*/v1/models/|delete_model\(\s*\"|featurebudget models delete\s+)"


def created_models(text: str) -> list[tuple[int, str]]:
    """(offset, name) of each model a document's snippets create, in order."""
    found = {(m.start(), m.group(1)) for pattern in _CREATE for m in pattern.finditer(text)}
    return sorted(found)


def test_documents_create_distinct_models_or_delete_first():
    """A reader runs the README, then the docs, against one service: a model name created
    again (in the same or a later document) is a 409 unless the document deletes it first
    (in a snippet or in its prose)."""
    seen: dict[str, str] = {}
    clashes = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        for offset, name in created_models(text):
            deleted = re.search(_DELETE + re.escape(name) + r"\b", text[:offset])
            if name in seen and not deleted:
                clashes.append(f"{where} creates {name!r}, already created in {seen[name]}")
            seen[name] = where
    assert not clashes, clashes


def test_created_models_finds_every_form():
    text = textwrap.dedent("""\
        client.create_model("a", algorithm="sofs")
        client.create_batch_model("b", groups=[])
        featurebudget models create c --algorithm pet
        curl -X POST localhost:8000/v1/models -H 'content-type: application/json' -d '{
          "name": "d", "algorithm": "cs-g-omp"}'
        curl -X POST localhost:8000/v1/models/e/examples -d '{"name": "not a model"}'
        """)
    assert [name for _, name in created_models(text)] == ["a", "b", "c", "d"]


# ---------------------------------------------------------------------- shell snippets
_RUN = re.compile(r"^<!--\s*snippet:\s*run\s*-->$")


def marked_shell_blocks(text: str) -> list[Block]:
    """The ```bash blocks whose fence follows ``<!-- snippet: run -->`` (blank lines aside):
    shell snippets that run as written against the service, in document order."""
    lines = text.splitlines()
    marked = []
    for block in fenced_blocks(text):
        before = next((lines[k].strip() for k in range(block.line - 2, -1, -1)
                       if lines[k].strip()), "")
        if block.language == "bash" and _RUN.match(before):
            marked.append(block)
    return marked


def _shell_params():
    return [pytest.param(path, id=str(path.relative_to(ROOT))) for path in DOCUMENTS
            if marked_shell_blocks(path.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("path", [p for p in DOCUMENTS if p.parent.name == "docs"],
                         ids=lambda p: p.name)
def test_every_shell_block_is_marked(path: Path):
    """Each ```bash block of docs/ either runs (``<!-- snippet: run -->``) or says why it
    cannot here (``<!-- snippet: skip REASON -->``): a new block is one or the other."""
    text = path.read_text(encoding="utf-8")
    runs = {b.line for b in marked_shell_blocks(text)}
    unmarked = [b.line for b in fenced_blocks(text) if b.language in ("bash", "sh", "shell")
                and b.line not in runs and b.skip in (None, "no reason given")]
    assert not unmarked, (f"{path.name}: the bash blocks at lines {unmarked} have neither "
                          "<!-- snippet: run --> nor <!-- snippet: skip REASON -->")


def test_marked_and_unmarked_shell_blocks_are_told_apart():
    text = "<!-- snippet: run -->\n```bash\ntrue\n```\n```bash\nfalse\n```\n" \
           "<!-- snippet: skip needs docker -->\n```bash\ndocker ps\n```\n"
    assert [b.line for b in marked_shell_blocks(text)] == [2]
    assert [(b.line, b.skip) for b in fenced_blocks(text)] == [
        (2, None), (5, None), (9, "needs docker")]


@pytest.fixture(scope="module")
def shell_service(tmp_path_factory):
    """One service (embedded backend, batch worker in-process) for every document's shell
    blocks: the documents create distinct models (checked above)."""
    from service.settings import Settings
    from tests.support.live_server import live_server

    settings = Settings(redis_url=None, data_dir=tmp_path_factory.mktemp("data"),
                        api_keys="", batch_worker=True, consumer_block_ms=20,
                        job_poll_seconds=0.05)
    with live_server(settings, start_timeout=600) as url:
        yield url


@pytest.mark.parametrize("path", _shell_params())
def test_marked_shell_snippets_run(path: Path, tmp_path, shell_service):
    """The marked shell blocks of a document run in order in one bash script against the
    real service (its URL put in place of ``localhost:8000``), from a folder where the
    repository's ``examples/`` and ``docker/`` are at hand; every curl must answer 2xx
    (``--fail-with-body``), every command exit 0."""
    import subprocess
    import sys

    for folder in ("examples", "docker"):
        (tmp_path / folder).symlink_to(ROOT / folder, target_is_directory=True)
    lines = ["set -euo pipefail",
             'curl() { command curl --fail-with-body -sS "$@"; echo; }']
    address = shell_service.removeprefix("http://")
    for block in marked_shell_blocks(path.read_text(encoding="utf-8")):
        code = re.sub(r"\b(localhost|127\.0\.0\.1):8000\b", address, block.code)
        lines += [f"echo '--- {path.name} line {block.line}' >&2", code.rstrip("\n")]
    env = dict(os.environ, FEATUREBUDGET_URL=shell_service,
               PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
