"""The platform's settings (scalegrade/server/config.py): defaults, a TOML file, the
environment over it, the command over both, and bad settings named with where they are."""

from __future__ import annotations

import pytest

from scalegrade.server.config import ConfigError, load


def test_a_course_alone_serves_with_the_embedded_defaults(tmp_path):
    config = load(tmp_path)
    assert config.data_dir == (tmp_path / "server").resolve()
    assert config.db_url == f"sqlite:///{tmp_path.resolve() / 'server' / 'gradebook.sqlite'}"
    assert (config.url, config.workers, config.cookies_secure) == (
        "http://127.0.0.1:8000",
        2,
        False,
    )


def test_the_file_then_the_environment_then_the_command(tmp_path, monkeypatch):
    (tmp_path / "serve.toml").write_text(
        'port = 9000\nworkers = 4\ndata = "state"\npublic_url = "https://grade.example.edu"\n'
    )
    config = load(tmp_path)
    assert (config.port, config.workers) == (9000, 4)
    assert config.data_dir == (tmp_path / "state").resolve()  # relative to the file
    assert config.cookies_secure  # served over https
    monkeypatch.setenv("SCALEGRADE_SERVE_WORKERS", "3")
    assert load(tmp_path).workers == 3
    assert load(tmp_path, workers=1).workers == 1


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("workers = -1", "setting 'workers'"),
        ('sandbox = "vm"', "setting 'sandbox'"),
        ("colour = 1", "setting 'colour'"),
        ('executor = "dask"', "scheduler"),
        ("port = ", "not TOML"),
    ],
)
def test_a_bad_setting_is_named_with_its_file(tmp_path, text, said):
    (tmp_path / "serve.toml").write_text(text + "\n")
    with pytest.raises(ConfigError, match=said) as err:
        load(tmp_path)
    assert "serve.toml" in str(err.value)


def test_without_a_course_it_says_how_to_name_one():
    with pytest.raises(ConfigError, match="--course DIR"):
        load(None)


def test_a_bad_value_is_blamed_on_where_it_was_set(tmp_path, monkeypatch):
    (tmp_path / "serve.toml").write_text("port = 9000\n")
    monkeypatch.setenv("SCALEGRADE_SERVE_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match=r"^\$SCALEGRADE_SERVE_TIMEOUT: setting 'timeout'"):
        load(tmp_path)
