"""Each bad answer is refused with a message that says what is wrong and what is valid."""

from __future__ import annotations

import pytest


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
