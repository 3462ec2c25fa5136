"""``python -m gradgen``: the same command line as the ``gradgen`` script."""

from .cli import main

if __name__ == "__main__":
    main()
