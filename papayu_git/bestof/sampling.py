"""Who is asked, and how: one sample per candidate (docs/DESIGN.md, "Best of N").

Candidates from one model at one temperature would mostly repeat each other. So with a single
configured model, candidate 1 is exactly what `fix` asks (temperature 0, no lens) and each next
one is sampled warmer and given a different approach (a "lens" in the first message). With
`papayu.candidates.models` (PROVIDER/MODEL[@BASE_URL], comma-separated) the models take turns, each
first at temperature 0; a model that cannot be configured becomes a failed candidate in the
matrix, never the end of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from papayu_git import settings
from papayu_git.errors import PapayuError
from papayu_git.llm.config import LLMConfig, config_for, load_config

# A different angle per round, in the first message (prompts.user_message); round 0 is none.
LENSES = (
    "",
    "Prefer the smallest change that makes the goal's tests pass; touch as few lines and files as you can.",
    "Find the root cause first and fix it where the defect is, not where it shows.",
    "Consider an approach other than the most obvious one, and say in the summary why it is sound.",
)
MAX_TEMPERATURE = 1.2
OWN_URLS = ("openai", "ollama", "local")  # providers with a base URL of their own when none is given


@dataclass(frozen=True)
class Sample:
    index: int  # 1-based, the candidate's number in the matrix and its ref papayu/<run>/<index>
    label: str  # PROVIDER/MODEL, as the matrix names it
    config: LLMConfig | None  # None: the entry could not be configured (error)
    error: PapayuError | None
    temperature: float
    lens: str

    def to_dict(self) -> dict[str, object]:
        return {"model": self.label, "temperature": self.temperature, "lens": self.lens}


def temperature(round_no: int) -> float:
    """0 for a model's first candidate, then 0.3, 0.5, 0.7, … up to MAX_TEMPERATURE."""
    return 0.0 if round_no == 0 else min(MAX_TEMPERATURE, round(0.3 + 0.2 * (round_no - 1), 2))


def samples(root: Path, count: int) -> list[Sample]:
    """``count`` samples; with papayu.candidates.models at least one per configured model (each is asked)."""
    cwd = str(root)
    entries = [e.strip() for e in settings.get("candidates_models", cwd).split(",") if e.strip()]
    models = [endpoint(entry, cwd) for entry in entries] or [_configured(cwd)]
    out = []
    for number in range(1, max(count, len(models)) + 1):
        label, config, error = models[(number - 1) % len(models)]
        round_no = (number - 1) // len(models)
        out.append(Sample(number, label, config, error, temperature(round_no), LENSES[round_no % len(LENSES)]))
    return out


def _configured(cwd: str) -> tuple[str, LLMConfig | None, PapayuError | None]:
    config = load_config(cwd)  # the one configured model: its errors are the command's, as in `fix`
    # No model configured: the server's one, asked by the candidate's client (asking.py), replaces "?".
    return f"{config.provider.value}/{config.model or '?'}", config, None


def endpoint(entry: str, cwd: str | None = None) -> tuple[str, LLMConfig | None, PapayuError | None]:
    """(label, config, error) of one PROVIDER/MODEL[@BASE_URL] entry. Model names may hold `/`
    and `:` (Qwen/Qwen2.5-Coder, qwen2.5-coder:7b): the provider ends at the first `/`, a base
    URL starts at the last `@http`."""
    provider, _, rest = entry.partition("/")
    model, base_url = rest, ""
    at = rest.rfind("@http")
    if at >= 0:
        model, base_url = rest[:at], rest[at + 1 :]
    label = f"{provider}/{model}" if model else entry
    if not provider or not model:
        problem = PapayuError(
            "ERR_LLM_CONFIG",
            f"papayu.candidates.models entry {entry!r} is not PROVIDER/MODEL[@BASE_URL]",
            path="papayu.candidates.models",
            hint="List models as openai/gpt-4o-mini,ollama/qwen2.5-coder:7b,"
            "openai-compatible/NAME@http://127.0.0.1:8080/v1 (git config papayu.candidates.models).",
        )
        return label, None, problem
    if not base_url and provider.strip().lower() not in OWN_URLS:  # a compatible server: the configured one
        base_url = settings.get("llm_base_url", cwd)
    try:
        return label, config_for(provider, model, base_url, cwd), None
    except PapayuError as exc:
        return label, None, exc
