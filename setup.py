"""The build of dbsim's optional C extension (everything else is in pyproject.toml).

``optional=True``: on a machine without a compiler or Python headers the install still
succeeds; file sessions then run on Python threads and the run's summary says why.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "storage.targets._fileloop",
            sources=["storage/targets/native/fileloop.c"],
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
            optional=True,
        )
    ]
)
