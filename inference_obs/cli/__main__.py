"""``python -m inference_obs.cli``."""

from inference_obs.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
