import io

from collbench.progress import Progress, fmt_duration


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    p = Progress(2, estimate_s=10.0, stream=out)
    p.update(5.0, "launch a ok")
    p.update(5.0, "launch b ok")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/2] launch a ok (ETA ")
    assert lines[1] == "[2/2] launch b ok (ETA 0:00)"
    assert "\r" not in out.getvalue()


def test_redrawn_bar_on_a_terminal() -> None:
    out = Tty()
    p = Progress(4, estimate_s=40.0, stream=out)
    p.update(10.0, "first")
    text = out.getvalue()
    assert text.startswith("\r\x1b[K[") and "1/4 ETA" in text and "first" in text
    assert "#" * 7 in text and not text.endswith("\n")


def test_eta_scales_the_model_by_observed_speed() -> None:
    p = Progress(3, estimate_s=30.0, stream=io.StringIO())
    p.start -= 20.0  # 20 s spent on what the model said takes 10 s: twice as slow
    p.update(10.0, "x")
    assert abs(p.eta() - 40.0) < 1.0


def test_fmt_duration() -> None:
    assert fmt_duration(0) == "0:00"
    assert fmt_duration(61.4) == "1:01"
    assert fmt_duration(3725) == "1:02:05"
