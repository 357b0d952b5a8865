"""venvs.made_once: one folder per virtualenv and kind, made once, made again when half made;
postgres.server_of: the server a SQLAlchemy URL names."""

from __future__ import annotations

from computed.testing import postgres, venvs


def test_each_kind_is_made_once_in_a_folder_of_its_own(tmp_path):
    venv = tmp_path / "placement-abc"
    venv.mkdir()
    made = []

    def make(kind):
        def fill(folder):
            made.append(kind)
            (folder / "what").write_text(kind)
        return fill

    first = venvs.made_once(venv, make("postgresql"), kind="postgresql")
    again = venvs.made_once(venv, make("postgresql"), kind="postgresql")
    other = venvs.made_once(venv, make("sqlite"), kind="sqlite")
    assert first == again != other
    assert made == ["postgresql", "sqlite"]
    assert (first / "what").read_text() == "postgresql" and (other / "what").read_text() == "sqlite"
    # The default kind is the folder the Ironic and Keystone templates always had.
    assert venvs.made_once(venv, make("template")).name == "placement-abc.template"


def test_a_half_made_folder_is_made_again(tmp_path):
    venv = tmp_path / "ironic-abc"
    venv.mkdir()

    def fails(folder):
        (folder / "half").write_text("")
        raise RuntimeError("interrupted")

    try:
        venvs.made_once(venv, fails)
    except RuntimeError:
        pass
    folder = venvs.made_once(venv, lambda f: (f / "whole").write_text(""))
    assert sorted(p.name for p in folder.iterdir()) == [venvs.COMPLETE, "whole"]


def test_server_of_a_url():
    assert postgres.server_of("postgresql+psycopg2://postgres@127.0.0.1:5433/placement_x") == \
        ("127.0.0.1", 5433)
    assert postgres.server_of("postgresql+psycopg2://postgres@db.example/x") == \
        ("db.example", postgres.SHARED_PORT)
