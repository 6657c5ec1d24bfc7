"""Each bad answer is refused with a message that says what is wrong and what is valid."""

from __future__ import annotations

import re
import tomllib
import unicodedata

import pytest
import yaml
from conftest import TEMPLATE


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"project_name": ""}, "The project name is empty"),
        ({"project_name": "   "}, "The project name is empty"),
        ({"project_name": "two\nlines"}, "The project name is one line of text"),
        ({"project_name": "tab\there"}, "without tabs or control characters"),
        ({"project_name": "Проект"}, "has no Latin letters or digits"),
        ({"project_name": "東京"}, "add some, e.g. '東京 ML'"),
        ({"project_name": "x" * 61}, "keep it to 60 or fewer"),
        ({"parts": []}, "Choose at least one kind of part"),
        ({"parts": ["reinforcement"]}, "is not in ['sl_neural', 'sl_tree', 'rl']"),
        ({"wandb_entity": "my team"}, "A W&B entity contains only"),
        ({"copyright_year": "26"}, "The copyright year is four digits"),
        ({"project_name": "pip"}, "gives the distribution name 'pip', which is a tool or library"),
        ({"project_name": "Torch"}, "gives the distribution name 'torch'"),
        ({"project_name": "Scikit Learn"}, "gives the distribution name 'scikit-learn'"),
        ({"project_name": "setuptools"}, "installing the project would replace it"),
        ({"project_name": "Tórch"}, "gives the distribution name 'torch'"),  # accents dropped first
        ({"author_name": "Ana\x00"}, "The author name is one line of text"),
    ],
)
def test_bad_answer_is_refused(copie, answers, message):
    result = copie.copy(extra_answers=answers)
    assert result.exit_code != 0
    assert message in str(result.exception)


def nfkd_slug(name: str) -> str:
    """The slug as unicodedata's NFKD decomposition gives it: what copier.yml's Jinja
    slug must agree with wherever NFKD has an ASCII answer."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", ascii_name).strip("-")


# Letters NFKD drops (it has no ASCII letter for them); the slug keeps their Latin letter.
NO_NFKD_LETTER = "Straße Æsir Øl Łódź Işık"  # noqa: RUF001
# A name in any language, and the slug that names its distribution and W&B project.
GOOD_NAMES = {
    "Digits Classifier": "digits-classifier",
    "ml-pipeline_2": "ml-pipeline-2",
    "A": "a",
    "42 models": "42-models",
    "Mi Proyecto-Ñandú 2 (beta)": "mi-proyecto-nandu-2-beta",
    "Crème Brûlée: «Vision» v2.1": "creme-brulee-vision-v2-1",
    "Ｆｕｌｌｗｉｄｔｈ ML": "fullwidth-ml",  # noqa: RUF001
    "Проект Alpha": "alpha",
    NO_NFKD_LETTER: "strasse-aesir-ol-lodz-isik",
    # Quotes, backslashes and TOML's comment sign stay valid TOML and Python.
    'Ana\'s "Best" \\ #1 Model': "ana-s-best-1-model",
    "a\\N{LATIN SMALL LETTER B}": "a-n-latin-small-letter-b",  # typed, not a character
}


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_project_names_give_a_slug(copie, name):
    result = copie.copy(extra_answers={"project_name": name})
    assert result.exit_code == 0, result.exception
    assert result.answers["project_name"] == name
    slug = GOOD_NAMES[name]
    if name != NO_NFKD_LETTER:
        assert slug == nfkd_slug(name)
    pyproject = tomllib.loads((result.project_dir / "pyproject.toml").read_text())["project"]
    assert pyproject["name"] == slug
    assert pyproject["description"] == f"{name}: ML training pipelines"
    assert pyproject["authors"] == [{"name": f"The {name} authors"}]
    assert (result.project_dir / "README.md").read_text().startswith(f"# {name}\n")
    project = (result.project_dir / "src" / "project.py").read_text()
    assert f'PROJECT_SLUG = "{slug}"' in project  # the W&B project


def test_the_validator_and_the_answer_compute_the_same_slug():
    """copier.yml spells the slug twice (a validator cannot read a computed answer)."""
    questions = yaml.safe_load((TEMPLATE / "copier.yml").read_text())
    in_validator = re.search(r"\{% set slug = (.*?) %\}", questions["project_name"]["validator"], re.S)[1]
    computed = re.fullmatch(r"\{\{ (.*) \}\}", questions["project_slug"]["default"], re.S)[1]
    assert in_validator == computed


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
