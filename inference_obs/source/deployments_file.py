"""Files a live export or report reads: deployments, and redaction rules (YAML or JSON).

A deployments file holds the ``deployments`` section of a dataset manifest: either a
mapping with a ``deployments`` list (so a dataset's ``manifest.json``, or its
directory, works as is: only ``deployments`` is read) or the list itself::

    deployments:
      - name: PRO
        replicas: [PRO-01]
        selector: {namespace: llm, pod: "~pro-model-.*"}
        hardware: {gpu_model: NVIDIA RTX PRO 5000 72GB Blackwell, gpus_per_replica: 8,
                   gpu_hour_price: 2.5}
        engine: {name: vllm}

A rules file holds a :class:`~inference_obs.source.dataset.redaction.RedactionRules`
mapping (``keep``, ``drop``, ``pseudonymise``, ``unlisted``, ``values``, ...);
fields it does not give keep their defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import yaml

from inference_obs.deployment import Deployment, check_names
from inference_obs.documents import json_document, yaml_document
from inference_obs.errors import ConfigurationError, DatasetError, DocumentError
from inference_obs.source.dataset.manifest import WHOLE, validation_problems
from inference_obs.source.dataset.reader import MANIFEST
from inference_obs.source.dataset.redaction import RedactionRules

__all__ = ["load_deployments", "load_rules"]


def load_deployments(path: str | Path) -> tuple[Deployment, ...]:
    """Read the deployments of a YAML or JSON file, a manifest, or a dataset directory.

    Parameters
    ----------
    path
        A ``.json`` file (read as JSON), any other file (read as YAML), or a
        dataset directory (its ``manifest.json`` is read).

    Returns
    -------
    tuple of Deployment
        In file order; at least one, with distinct names.

    Raises
    ------
    DatasetError
        Naming the file and, for invalid content, each offending field and
        its deployment (``deployments[0].hardware.gpus_per_replica: ...
        (deployment 'PRO')``).
    """
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST
    data = _read(path, "deployments")
    if isinstance(data, dict):
        if "deployments" not in data:
            raise DatasetError(f"{path}: no 'deployments' field; expected a manifest's section")
        data = data["deployments"]
    if not isinstance(data, list) or not data:
        raise DatasetError(f"{path}: deployments must be a non-empty list")
    deployments = []
    problems = []
    for i, item in enumerate(data):
        try:
            deployments.append(Deployment.model_validate(item))
        except pydantic.ValidationError as exc:
            # The name too, where there is one: a long file is read by names, not places.
            name = item.get("name") if isinstance(item, dict) else None
            whose = f" (deployment {name!r})" if isinstance(name, str) else ""
            for part in validation_problems(exc).split("; "):
                part = part.replace(WHOLE, "", 1)
                where = f"deployments[{i}]{'' if part.startswith(':') else '.'}"
                problems.append(f"{where}{part}{whose}")
    if problems:
        raise DatasetError(f"{path}: {'; '.join(problems)}")
    names = [d.name for d in deployments]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DatasetError(f"{path}: deployment names repeat: {', '.join(repeated)}")
    try:
        check_names(names)
    except ConfigurationError as exc:
        raise DatasetError(f"{path}: {exc}") from None
    return tuple(deployments)


def load_rules(path: str | Path) -> RedactionRules:
    """Read redaction rules from a YAML or JSON file (a ``.json`` suffix reads JSON).

    Raises
    ------
    DatasetError
        Naming the file and each offending field.
    """
    path = Path(path)
    data = _read(path, "rules")
    try:
        return RedactionRules.model_validate({} if data is None else data)
    except pydantic.ValidationError as exc:
        raise DatasetError(f"{path}: {validation_problems(exc).replace(WHOLE, 'rules')}") from None


def _read(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no {what} file there") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    if path.suffix.lower() == ".json":
        try:
            return json_document(text, str(path))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
        except DocumentError as exc:
            raise DatasetError(str(exc)) from None
    try:
        return yaml_document(text, str(path))
    except DocumentError as exc:
        raise DatasetError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise DatasetError(f"{where}: not YAML: {problem}") from None
