"""Push an exported directory to a Hugging Face Hub model repository.

Through ``huggingface_hub``: the repository is created if it is missing, then the directory is
uploaded in one commit. The token comes from ``token`` or wherever ``huggingface_hub`` finds
one (``HF_TOKEN``, ``hf auth login``); it travels only in the request headers and never
appears in a message: hub errors are reworded here and scrubbed of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clustertune.errors import ModelError

COMMIT_MESSAGE = "Upload model exported by clustertune"


@dataclass(frozen=True)
class Pushed:
    repo_id: str
    url: str
    commit: str


def _scrub(text: str, token: str | None) -> str:
    return text.replace(token, "***") if token else text


def push_dir(directory: Path, repo_id: str, *, token: str | None = None, private: bool = False,
             endpoint: str | None = None) -> Pushed:
    """Create ``repo_id`` if needed and upload ``directory`` into it; typed errors for what a
    user can fix (offline mode, no token, a refused token, a bad name, no connection)."""
    from huggingface_hub import HfApi, constants, get_token
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError

    if constants.is_offline_mode():
        raise ModelError("--push: HF_HUB_OFFLINE=1 is set, so huggingface_hub makes no requests; unset it for "
                         "this command (the export itself is written)")
    token = token or get_token()
    if not token:
        raise ModelError("--push: no Hugging Face token; set HF_TOKEN to a token with write access (or log in "
                         "with `hf auth login`, or pass --token)")
    api = HfApi(endpoint=endpoint, token=token)
    where = api.endpoint
    try:
        repo = api.create_repo(repo_id, repo_type="model", private=private or None, exist_ok=True)
        info = api.upload_folder(repo_id=repo.repo_id, folder_path=str(directory), repo_type="model",
                                 commit_message=COMMIT_MESSAGE)
    except HFValidationError as exc:
        raise ModelError(f"--push {repo_id}: not a repository id ({_scrub(str(exc), token)}); "
                         "use NAMESPACE/NAME") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        detail = _scrub(exc.server_message or str(exc).splitlines()[0], token)
        if status in (401, 403):
            raise ModelError(f"--push {repo_id}: {where} refused the token (HTTP {status}: {detail}); give a "
                             "token with write access to that namespace in HF_TOKEN or --token") from None
        raise ModelError(f"--push {repo_id}: {where} answered HTTP {status}: {detail}") from None
    except Exception as exc:
        # Connection failures come from huggingface_hub's HTTP client (httpx) as its own types.
        if isinstance(exc, OSError) or type(exc).__module__.split(".")[0].startswith("httpx"):
            raise ModelError(f"--push {repo_id}: cannot reach {where} ({_scrub(str(exc), token)}); check the "
                             "network, or HF_ENDPOINT if you use a mirror") from None
        raise
    return Pushed(repo_id=repo.repo_id, url=f"{where}/{repo.repo_id}", commit=str(info.oid))
