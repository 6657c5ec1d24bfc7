"""Each bad answer is refused with a message that says what is wrong and what is valid."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import TEMPLATE


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"project_name": ""}, "The project name is empty"),
        ({"project_name": "   "}, "The project name is empty"),
        ({"project_name": "42 models"}, "must start with a letter"),
        ({"project_name": "my/project"}, "may only contain letters, digits"),
        ({"project_name": "x" * 61}, "keep it to 60 or fewer"),
        ({"parts": []}, "Choose at least one kind of part"),
        ({"parts": ["reinforcement"]}, "is not in ['sl_neural', 'sl_tree', 'rl']"),
        ({"wandb_entity": "my team"}, "A W&B entity contains only"),
        ({"copyright_year": "26"}, "The copyright year is four digits"),
        ({"project_name": "pip"}, "gives the distribution name 'pip', which is a tool or library"),
        ({"project_name": "Torch"}, "gives the distribution name 'torch'"),
        ({"project_name": "Scikit Learn"}, "gives the distribution name 'scikit-learn'"),
        ({"project_name": "setuptools"}, "installing the project would replace it"),
    ],
)
def test_bad_answer_is_refused(copie, answers, message):
    result = copie.copy(extra_answers=answers)
    assert result.exit_code != 0
    assert message in str(result.exception)


@pytest.mark.parametrize("name", ["Digits Classifier", "ml-pipeline_2", "A"])
def test_good_project_names_give_a_slug(copie, name):
    result = copie.copy(extra_answers={"project_name": name})
    assert result.exit_code == 0, result.exception
    assert result.answers["project_name"] == name
    pyproject = (result.project_dir / "pyproject.toml").read_text()
    assert f'name = "{name.lower().replace(" ", "-").replace("_", "-")}"' in pyproject


def test_the_copyright_year_is_kept_in_the_answers(copie):
    result = copie.copy(extra_answers={"copyright_year": "2024"})
    assert result.exit_code == 0, result.exception
    assert "Copyright (c) 2024 " in (result.project_dir / "LICENSE").read_text()
    assert result.answers["copyright_year"] == "2024"


def test_every_dependency_is_a_name_the_project_may_not_take():
    """A project whose distribution name is one of its own dependencies (or the tools that
    install and test it) would replace that package when installed."""
    validator = yaml.safe_load((TEMPLATE / "copier.yml").read_text())["project_name"]["validator"]
    refused = set(re.search(r"in \[([^\]]*)\]", validator)[1].replace("'", "").replace(" ", "").split(","))
    pyproject = (TEMPLATE / "template" / "pyproject.toml.jinja").read_text()
    required = set(re.findall(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=', pyproject))  # build, run, extras
    assert {"torch", "xgboost", "pytest", "setuptools", "dask"} <= required
    assert required - refused == set()
