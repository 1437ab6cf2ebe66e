"""One domain error base, mapped to a response in one place: a new error type of any domain is
a 400 with its own sentence the moment it subclasses ``ApplicationError`` (before, each had to
be registered in the API's error table, and an unregistered one was a 500)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from rest_framework.test import APIRequestFactory

from kit.api import api_exception_handler
from kit.errors import ApplicationError

PACKAGES = ("accounting", "allocations", "kit", "people", "portal", "projects")


def _domain_errors() -> list[type[Exception]]:
    """Every public exception class the project defines whose name says it is an error of
    input or of a rule (``...Error``), across every module of every package."""
    found: set[type[Exception]] = set()
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for module_info in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if ".migrations" in module_info.name or module_info.name.endswith(".tests"):
                continue
            module = importlib.import_module(module_info.name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, Exception)
                    and value.__module__ == module.__name__
                    and not name.startswith("_")
                    and name.endswith("Error")
                ):
                    found.add(value)
    return sorted(found, key=lambda error: f"{error.__module__}.{error.__qualname__}")


def test_a_new_error_of_a_domain_is_a_400_with_its_sentence_without_registering_it():
    class BrandNewRuleError(ApplicationError):
        pass

    request = APIRequestFactory().get("/api/v1/")
    response = api_exception_handler(BrandNewRuleError("the rule says no"), {"request": request})

    assert response is not None
    assert response.status_code == 400
    assert response.data == {"message": "the rule says no", "errors": {}}


def test_an_error_outside_the_domains_is_still_left_to_django():
    assert api_exception_handler(RuntimeError("a bug"), {}) is None


@pytest.mark.parametrize("error", _domain_errors(), ids=lambda error: error.__qualname__)
def test_every_error_of_the_domains_has_the_one_base(error):
    # Failures of a service (SlurmUnavailable, ProviderUnavailable, ImportLockBusy) are not
    # named ...Error: they are not rules of the domain, and stay outside.
    assert issubclass(error, ApplicationError), f"{error.__module__}.{error.__qualname__}"
