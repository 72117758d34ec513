"""What the CLI tests share: the Typer runner, a tiny scenario and the one-line-error check."""

from pathlib import Path

from typer.testing import CliRunner

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]

TINY = """\
name: tiny
model: {id: test/tiny, revision: unpinned, hidden: 128, intermediate: 128, experts: 4, top_k: 2}
topology: {ep: 2}
routing: {family: uniform, seed: 3}
shape: {tokens_per_rank: 4, alignment: 16}
precision: fp8
measure: {regimes: [ffn, kernel], stages: [act], warmup: 0, blocks: 2, iterations: 1}
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("moebench: error: ")
    return lines[0]
