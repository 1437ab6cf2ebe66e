import pytest
from django.core.exceptions import ImproperlyConfigured

from kit.env import (
    env_bool,
    env_int,
    env_int_list,
    env_list,
    env_optional,
    env_secret,
    env_str,
)


def test_bool_accepts_the_usual_spellings(monkeypatch):
    for text, expected in [("1", True), ("yes", True), ("ON", True), ("0", False), ("off", False)]:
        monkeypatch.setenv("X_FLAG", text)
        assert env_bool("X_FLAG", not expected) is expected


def test_bool_rejects_a_typo_loudly(monkeypatch):
    monkeypatch.setenv("X_FLAG", "ture")
    with pytest.raises(ImproperlyConfigured, match=r"X_FLAG='ture' is not a boolean"):
        env_bool("X_FLAG", False)


def test_int_rejects_text_and_values_below_the_minimum(monkeypatch):
    monkeypatch.setenv("X_NUM", "ten")
    with pytest.raises(ImproperlyConfigured, match="is not an integer"):
        env_int("X_NUM", 1)
    monkeypatch.setenv("X_NUM", "-1")
    with pytest.raises(ImproperlyConfigured, match="must be at least 0"):
        env_int("X_NUM", 1, minimum=0)


def test_int_list_and_optional_defaults(monkeypatch):
    monkeypatch.delenv("X_NUM", raising=False)
    monkeypatch.setenv("X_LIST", " a, ,b ")
    monkeypatch.setenv("X_EMPTY", "  ")
    assert env_int("X_NUM", 7) == 7
    assert env_list("X_LIST", []) == ["a", "b"]
    assert env_optional("X_EMPTY") is None


def test_int_list_reads_numbers_and_refuses_a_bad_one_loudly(monkeypatch):
    monkeypatch.delenv("X_DAYS", raising=False)
    assert env_int_list("X_DAYS", [30, 14, 7], minimum=1) == [30, 14, 7]
    monkeypatch.setenv("X_DAYS", "60, 7")
    assert env_int_list("X_DAYS", [30], minimum=1) == [60, 7]
    monkeypatch.setenv("X_DAYS", "60,seven")
    with pytest.raises(ImproperlyConfigured, match=r"X_DAYS: 'seven' is not an integer"):
        env_int_list("X_DAYS", [30])
    monkeypatch.setenv("X_DAYS", "0")
    with pytest.raises(ImproperlyConfigured, match="X_DAYS: 0 must be at least 1"):
        env_int_list("X_DAYS", [30], minimum=1)


def test_required_string_names_the_variable(monkeypatch):
    monkeypatch.delenv("X_REQUIRED", raising=False)
    with pytest.raises(ImproperlyConfigured, match="X_REQUIRED is required"):
        env_str("X_REQUIRED")


def test_secret_is_read_from_its_file(monkeypatch, tmp_path):
    secret_file = tmp_path / "key"
    secret_file.write_text("s3cret\n")
    monkeypatch.delenv("X_SECRET", raising=False)
    monkeypatch.setenv("X_SECRET_FILE", str(secret_file))
    assert env_secret("X_SECRET") == "s3cret"


def test_secret_given_twice_or_unreadable_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("X_SECRET", "a")
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env_secret("X_SECRET")
    monkeypatch.delenv("X_SECRET")
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_secret("X_SECRET")
