"""The one jinja2 environment for every generated file (templates/ at the repository root)."""

from __future__ import annotations

from functools import lru_cache

import jinja2

from edgemem.package_data import data_dir

from .escape import FILTERS

TEMPLATES_DIR = data_dir("templates")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,  # a missing value is a bug, never an empty string in C
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)  # every string a model, board file or file name supplies goes through one (escape.py)
    return env


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)
