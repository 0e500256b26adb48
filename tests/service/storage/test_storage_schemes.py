"""The storage scheme table and FEATUREBUDGET_STORAGE_URL: each scheme opens its backend,
the old names keep working, a bad scheme stops the settings with the list of schemes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from service.settings import Settings
from service.storage import make_storage, schemes
from service.storage.local import LocalStorage


@pytest.fixture(autouse=True)
def _no_storage_env(monkeypatch):
    for name in ("FEATUREBUDGET_STORAGE_URL", "FEATUREBUDGET_REDIS_URL",
                 "FEATUREBUDGET_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_unset_is_the_embedded_backend_in_data_dir(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert settings.storage_location == f"file://{tmp_path}" and settings.redis_url is None
    storage = make_storage(settings)
    assert isinstance(storage, LocalStorage) and storage.root == tmp_path


def test_a_file_url_sets_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FEATUREBUDGET_STORAGE_URL", f"file://{tmp_path}/d")
    settings = Settings()
    assert settings.data_dir == tmp_path / "d" and settings.redis_url is None
    assert make_storage(settings).root == tmp_path / "d"
    assert schemes.file_path("file://data") == Path("data")
    with pytest.raises(ValidationError, match="set one"):
        Settings(data_dir=tmp_path / "elsewhere")


@pytest.mark.parametrize("url", ["redis://h:1/0", "rediss://h:1/0", "unix:///tmp/r.sock",
                                 "redis+cluster://h:1,h:2/", "rediss+cluster://h:1/",
                                 "redis+sentinel://h:1/master"])
def test_every_redis_scheme_opens_the_redis_backend(url, monkeypatch):
    from service.storage.redis import RedisStorage

    monkeypatch.setenv("FEATUREBUDGET_STORAGE_URL", url)
    settings = Settings()
    assert settings.redis_url == url == settings.storage_location
    assert isinstance(make_storage(settings), RedisStorage)  # (not opened: no server)
    assert schemes.redis_url_in_env() == url


def test_the_old_name_is_an_alias_and_both_must_agree(monkeypatch):
    monkeypatch.setenv("FEATUREBUDGET_REDIS_URL", "redis://h:1/0")
    assert Settings().storage_url == "redis://h:1/0"
    assert Settings(redis_url=None).storage_url is None  # an argument wins over both
    monkeypatch.setenv("FEATUREBUDGET_STORAGE_URL", "redis://h:1/0")
    assert Settings().redis_url == "redis://h:1/0"
    monkeypatch.setenv("FEATUREBUDGET_STORAGE_URL", "redis://other:1/0")
    with pytest.raises(ValidationError, match="name different storages"):
        Settings()


@pytest.mark.parametrize("url", ["http://h/", "postgres://h/db", "no-scheme",
                                 "rediss+sentinel://h:1/m"])
def test_a_bad_scheme_fails_at_startup_listing_the_schemes(url, monkeypatch):
    monkeypatch.setenv("FEATUREBUDGET_STORAGE_URL", url)
    with pytest.raises(ValidationError, match="names no storage backend") as caught:
        Settings()
    for row in schemes.SCHEMES.values():
        assert row.form in str(caught.value)


def test_a_malformed_redis_url_is_refused_by_its_backend(monkeypatch):
    monkeypatch.setenv("FEATUREBUDGET_STORAGE_URL", "redis+sentinel://h:1/")
    with pytest.raises(ValidationError, match="names the master"):
        Settings()


@pytest.mark.parametrize("scheme", sorted(schemes.SCHEMES))
def test_a_row_says_what_its_backend_is(scheme, tmp_path, monkeypatch):
    """What a row tells before any backend exists (shared, reachable with redis-py) is what
    the backend it opens says; its factory and check are functions, not import strings."""
    row = schemes.SCHEMES[scheme]
    assert callable(row.factory) and (row.check is None or callable(row.check))
    url = {"file": f"file://{tmp_path}", "unix": "unix:///tmp/r.sock",
           "redis+sentinel": "redis+sentinel://h:1/master"}.get(scheme, f"{scheme}://h:1/")
    if "cluster" not in scheme and scheme not in ("file", "unix", "redis+sentinel"):
        url += "0"
    monkeypatch.setenv("FEATUREBUDGET_STORAGE_URL", url)
    storage = make_storage(Settings())  # (not opened: no server)
    assert storage.shared is row.shared is schemes.is_shared(url) is schemes.shared_in_env()
    assert row.redis is (storage.kind == "redis") is (schemes.redis_url_in_env() == url)
