"""Package layout only (metadata lives in pyproject.toml).

The folders `migrate/` and `reference_train/` install as `portlayer.migrate` and `portlayer.train`:
top-level names of their own would collide with other distributions (sqlalchemy-migrate is `migrate`).
"""

from setuptools import find_packages, setup

MAPPED = {"portlayer.migrate": "migrate", "portlayer.train": "reference_train"}


def packages_under(name: str, folder: str) -> list[str]:
    return [name, *(f"{name}.{sub}" for sub in find_packages(folder))]


setup(
    packages=[
        *find_packages(include=["portlayer", "portlayer.*"]),
        *(package for name, folder in MAPPED.items() for package in packages_under(name, folder)),
    ],
    package_dir=MAPPED,
)
