"""A misspelt keyword of a spec names the field it meant (issue 38, item 5)."""

from __future__ import annotations

import dataclasses

import pytest

from supervision import ChildSpec, SupervisorSpec


def test_a_misspelt_childspec_keyword_says_which_field_it_meant() -> None:
    with pytest.raises(
        TypeError,
        match=r"ChildSpec\(\) got an unexpected keyword argument "
        r"'comand'; did you mean 'command'\?",
    ):
        ChildSpec("a", comand=["true"])  # type: ignore[call-arg]


def test_a_misspelt_supervisorspec_keyword_says_which_field_it_meant() -> None:
    with pytest.raises(TypeError, match="'childs'; did you mean 'children'"):
        SupervisorSpec("s", childs=[])  # type: ignore[call-arg]


def test_a_keyword_like_no_field_lists_the_fields() -> None:
    with pytest.raises(TypeError, match="'zzzz'; its fields: id, target, args"):
        ChildSpec("a", zzzz=1)  # type: ignore[call-arg]


def test_good_keywords_and_replace_still_work() -> None:
    spec = ChildSpec("a", command=["true"], shutdown=2)
    assert dataclasses.replace(spec, id="b") == ChildSpec("b", command=["true"], shutdown=2)
