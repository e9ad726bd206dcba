"""`python -m sundial.client.cli`: the `sundial` command, as the console script runs it."""

from sundial.client.cli import run

if __name__ == "__main__":
    run()
