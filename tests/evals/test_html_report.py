"""The HTML report: the numbers of a hand-written report, inert untrusted text, and the page
opened from a file in a headless chromium (charts drawn, sorting, filters, no console errors).
"""

from __future__ import annotations

import html.parser
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glassagent._evals.compare_html import render_compare_html
from glassagent._evals.html import render_html
from glassagent._evals.page import SCRIPT
from tests.support.browser import headless_chromium


def attempt(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "repeat": 0,
        "passed": True,
        "score": 1.0,
        "scores": [{"evaluator": "exact", "score": 1.0, "passed": True, "reason": "equal"}],
        "output": "42",
        "error": None,
        "stop_reason": "end_turn",
        "input_tokens": 100,
        "output_tokens": 10,
        "cost": "0.0001",
        "latency_ms": 100.0,
        "model_calls": 1,
        "tool_calls": 0,
        "tool_errors": 0,
        "events": None,
    }
    return base | fields


def case(name: str, tags: list[str], attempts: list[dict[str, Any]]) -> dict[str, Any]:
    passed = [a["passed"] for a in attempts]
    scores = [a["score"] for a in attempts]
    return {
        "name": name,
        "tags": tags,
        "pass_rate": sum(passed) / len(passed),
        "mean_score": sum(scores) / len(scores),
        "score_stdev": 0.5 if len(set(scores)) > 1 else 0.0,
        "pass_at_k": {"1": sum(passed) / len(passed)},
        "attempts": attempts,
    }


def sample_report() -> dict[str, Any]:
    """Five cases, six attempts: two pass, one fails on its tools, one is flaky, one times out."""
    fail_score = {"evaluator": "trajectory", "score": 0.0, "passed": False}
    return {
        "format": "glassagent.eval/1",
        "name": "smoke-run",
        "dataset": "smoke",
        "started_at": "2025-01-02T03:04:05+00:00",
        "duration_s": 4.2,
        "config": {
            "provider": "local",
            "model": "qwen2.5-coder-0.5b",
            "concurrency": 4,
            "repeat": 1,
            "timeout_s": 30.0,
            "evaluators": ["contains", "exact", "trajectory"],
        },
        "summary": {
            "cases": 5,
            "attempts": 6,
            "passed": 3,
            "pass_rate": 0.5,
            "mean_score": 0.4667,
            "input_tokens": 1234,
            "output_tokens": 567,
            "cost": "0.0012",
            "currency": "USD",
            "latency_ms": {"p50": 240.0, "p95": 2100.0, "max": 2500.0},
            "model_calls": 9,
            "tool_errors": 1,
        },
        "cases": [
            case(
                "add two numbers",
                ["math"],
                [attempt(cost="0.0004", latency_ms=120.0, events="cases/add two numbers-0.jsonl")],
            ),
            case("capital of France", ["facts"], [attempt(output="Paris", latency_ms=180.0)]),
            case(
                "weather tool",
                ["tools"],
                [
                    attempt(
                        passed=False,
                        score=0.0,
                        scores=[fail_score | {"reason": "expected get_weather, got none"}],
                        cost=None,
                        latency_ms=240.0,
                        tool_calls=1,
                        tool_errors=1,
                        model_calls=3,
                    )
                ],
            ),
            case(
                "flaky sum",
                ["math", "repeat"],
                [
                    attempt(cost="0.0002", latency_ms=300.0),
                    attempt(
                        repeat=1,
                        passed=False,
                        score=0.0,
                        output={"answer": 41},
                        cost="0.0003",
                        latency_ms=900.0,
                    ),
                ],
            ),
            case(
                "slow answer",
                [],
                [
                    attempt(
                        passed=False,
                        score=0.0,
                        scores=[],
                        output=None,
                        error="TimeoutError: the attempt took over 2 s",
                        cost="0.0002",
                        latency_ms=2500.0,
                        stop_reason=None,
                    )
                ],
            ),
        ],
    }


class Elements(html.parser.HTMLParser):
    """Every start tag with its attributes, and the text of each script element."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def elements(page: str) -> Elements:
    parser = Elements()
    parser.feed(page)
    parser.close()
    return parser


def test_the_page_shows_the_reports_numbers() -> None:
    page = render_html(sample_report())
    cards = dict(
        re.findall(
            r'data-card="([^"]+)"><div class="label">[^<]*</div><div class="value">([^<]*)', page
        )
    )
    assert cards == {
        "Pass rate": "50%",
        "Mean score": "0.47",
        "Tokens": "1,801",
        "Cost": "0.0012 USD",
        "Latency p50 / p95": "240 ms / 2.10 s",
        "Model calls": "9",
        "Tool errors": "1",
        "Model": "qwen2.5-coder-0.5b",
    }
    assert "3 of 6 attempts" in page
    assert "1,234 in · 567 out" in page
    assert "max 2.50 s" in page
    assert "local" in page
    assert "dataset smoke" in page
    assert (
        "concurrency 4 · repeat 1 · timeout_s 30.0 · evaluators contains, exact, trajectory" in page
    )
    for name in (
        "add two numbers",
        "capital of France",
        "weather tool",
        "flaky sum",
        "slow answer",
    ):
        assert f'data-name="{name}"' in page
    # a case's row: its pass rate with attempts, mean score with spread, tokens, summed cost
    flaky = page[page.index('data-name="flaky sum"') :]
    flaky = flaky[: flaky.index('id="case-4"')]
    assert "50% (1/2)" in flaky
    assert "0.50 ± 0.50" in flaky
    assert "200 / 20" in flaky
    assert "0.0005 USD" in flaky
    assert "600 ms" in flaky  # mean latency of its attempts
    assert "pass@1 0.50" in flaky
    assert "&quot;answer&quot;: 41" in flaky  # a JSON output, shown as JSON
    # attempts with their scores and reasons, errors, and the link to the recorded events
    assert "expected get_weather, got none" in page
    assert "TimeoutError: the attempt took over 2 s" in page
    assert 'href="cases/add%20two%20numbers-0.jsonl"' in page


def test_the_charts_have_a_bar_per_case_and_a_histogram_of_the_attempts() -> None:
    tags = elements(render_html(sample_report())).tags
    bars = [a for t, a in tags if t == "rect" and "bar" in (a.get("class") or "").split()]
    # score bars for the 5 cases, cost bars for the 4 priced ones
    assert len(bars) == 9
    assert [a["data-case"] for a in bars] == ["0", "1", "2", "3", "4", "0", "1", "3", "4"]
    assert [(a.get("class") or "").split()[1] for a in bars[:5]] == [
        "pass",
        "pass",
        "fail",
        "partial",
        "fail",
    ]
    bins = [int(a["data-count"] or 0) for t, a in tags if t == "rect" and a.get("class") == "bin"]
    assert len(bins) == 5
    assert sum(bins) == 6
    assert bins[0] == 4  # 120 to 596 ms: 120, 180, 240 and 300
    marks = [a["data-mark"] for t, a in tags if t == "line" and a.get("class") == "mark"]
    assert marks == ["p50", "p95"]


def test_a_report_without_prices_or_finished_attempts_says_so() -> None:
    report = sample_report()
    for each in report["cases"]:
        for one in each["attempts"]:
            one["cost"] = None
            one["latency_ms"] = None
    report["summary"]["cost"] = None
    page = render_html(report)
    assert "No cost known: the model has no price." in page
    assert "No attempt finished." in page
    assert "no price known" in page
    assert render_html({}).startswith("<!DOCTYPE html>")  # nothing at all still renders


def test_a_case_costs_what_its_attempts_cost_unless_one_is_unknown() -> None:
    report = sample_report()
    flaky = report["cases"][3]["attempts"]
    flaky[1]["evaluator_cost"] = "0.0001"
    page = render_html(report)
    assert "judging 0.0001 USD" in page
    flaky[0]["cost"] = None  # a partial sum would read as the whole
    page = render_html(report)
    row = page[page.index('id="case-3"') :]
    assert '<td data-key="cost" data-v="">—</td>' in row[: row.index("</tr>")]
    for each in report["cases"]:
        for one in each["attempts"]:
            one["cost"] = "0"
    assert "Every case cost 0: the model is free." in render_html(report)


UNTRUSTED = [
    "<script>alert(1)</script>",
    "</script><script>alert(2)</script>",
    "<img src=x onerror=alert(3)>",
    '"><svg onload=alert(4)>',
    "</textarea></pre></td></tr></table><b>5</b>",
]


def hostile_report() -> dict[str, Any]:
    report = sample_report()
    first = report["cases"][0]
    first["name"] = UNTRUSTED[0]
    first["tags"] = [UNTRUSTED[3]]
    only = first["attempts"][0]
    only["output"] = UNTRUSTED[1]
    only["error"] = UNTRUSTED[4]
    only["scores"][0]["reason"] = UNTRUSTED[2]
    only["scores"][0]["evaluator"] = UNTRUSTED[3]
    only["events"] = "javascript:alert(6)"
    only["stop_reason"] = UNTRUSTED[2]
    report["cases"][1]["attempts"][0]["events"] = "//example.com/x.jsonl"
    report["name"] = UNTRUSTED[1]
    report["config"]["model"] = UNTRUSTED[2]
    report["summary"]["currency"] = UNTRUSTED[0]
    return report


def test_untrusted_strings_stay_text() -> None:
    page = render_html(hostile_report())
    found = elements(page)
    assert found.scripts == [SCRIPT]  # the page's own script, and no other
    names = [tag for tag, _ in found.tags]
    assert "img" not in names
    assert names.count("svg") == 3  # the three charts
    assert "b" in names  # the attempts' own bold headings
    assert not [a for _, a in found.tags for key in a if key.startswith("on")]
    hrefs = [a["href"] for t, a in found.tags if t == "a"]
    assert hrefs == []  # neither a javascript: nor a //host link is made
    for text in UNTRUSTED:
        assert text not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>5</b>" not in page
    csp = next(
        a["content"] for t, a in found.tags if a.get("http-equiv") == "Content-Security-Policy"
    )
    assert csp is not None
    assert "script-src 'sha256-" in csp
    assert "unsafe-inline" not in csp.split("script-src")[1]


def test_the_page_loads_nothing_from_the_network() -> None:
    page = render_html(sample_report())
    assert "http:" not in page
    assert "https:" not in page
    found = elements(page)
    assert not [t for t, _ in found.tags if t in ("img", "iframe", "object", "embed")]
    assert [a.get("href") for t, a in found.tags if t == "link"] == ["data:,"]
    assert not [a for t, a in found.tags if "src" in a]


# ---- in a browser -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as driver:
        yield driver


def shown_names(browser: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        row.find_element(By.CSS_SELECTOR, "span.name").text
        for row in browser.find_elements(By.CSS_SELECTOR, "#cases tr.case-row")
        if row.is_displayed()
    ]


def console_errors(browser: Any) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def open_page(browser: Any, tmp_path: Path, report: dict[str, Any]) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(report), encoding="utf-8")
    browser.get(path.as_uri())


def test_the_page_from_a_file_draws_its_charts_sorts_and_filters(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(browser, tmp_path, sample_report())
    find, find_all = browser.find_element, browser.find_elements
    assert len(find_all(By.CSS_SELECTOR, "#chart-score svg rect.bar")) == 5
    assert len(find_all(By.CSS_SELECTOR, "#chart-cost svg rect.bar")) == 4
    assert len(find_all(By.CSS_SELECTOR, "#chart-latency svg rect.bin")) == 5
    # the charts are laid out: the bars have a size on the screen
    bar = find(By.CSS_SELECTOR, "#chart-score rect.bar")
    assert bar.size["width"] > 5
    assert bar.size["height"] > 50
    natural = ["add two numbers", "capital of France", "weather tool", "flaky sum", "slow answer"]
    assert shown_names(browser) == natural

    score_head = find(By.CSS_SELECTOR, 'th[data-key="score"] button')
    score_head.click()
    assert shown_names(browser)[:2] == ["weather tool", "slow answer"]
    assert shown_names(browser)[2] == "flaky sum"
    assert find(By.CSS_SELECTOR, 'th[data-key="score"]').get_attribute("aria-sort") == "ascending"
    score_head.click()
    assert shown_names(browser)[2:] == ["flaky sum", "weather tool", "slow answer"]
    find(By.CSS_SELECTOR, 'th[data-key="cost"] button').click()  # unpriced last
    assert shown_names(browser) == [
        "capital of France",
        "slow answer",
        "add two numbers",
        "flaky sum",
        "weather tool",
    ]
    find(By.CSS_SELECTOR, 'th[data-key="name"] button').click()
    assert shown_names(browser) == sorted(natural, key=str.lower)
    find(By.CSS_SELECTOR, 'th[data-key="index"] button').click()
    assert shown_names(browser) == natural

    Select(find(By.ID, "tag")).select_by_value("math")
    assert shown_names(browser) == ["add two numbers", "flaky sum"]
    assert find(By.ID, "shown").text == "2 of 5 cases"
    Select(find(By.ID, "tag")).select_by_value("")
    Select(find(By.ID, "status")).select_by_value("fail")
    assert shown_names(browser) == ["weather tool", "slow answer"]
    Select(find(By.ID, "status")).select_by_value("error")
    assert shown_names(browser) == ["slow answer"]
    Select(find(By.ID, "status")).select_by_value("partial")
    assert shown_names(browser) == ["flaky sum"]
    Select(find(By.ID, "status")).select_by_value("")
    find(By.ID, "find").send_keys("CAPITAL")
    assert shown_names(browser) == ["capital of France"]
    find(By.ID, "find").clear()
    find(By.ID, "find").send_keys(" ")  # an input event with an empty query shows all again
    assert len(shown_names(browser)) == 5
    assert console_errors(browser) == []


def test_a_case_opens_to_its_attempts(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, tmp_path, sample_report())
    find = browser.find_element
    flaky = find(By.ID, "case-3")
    detail = flaky.find_element(By.CSS_SELECTOR, "tr.detail")
    assert not detail.is_displayed()
    flaky.find_element(By.CSS_SELECTOR, "tr.case-row td[data-key=status]").click()
    assert detail.is_displayed()
    attempts = detail.find_elements(By.CSS_SELECTOR, ".attempt")
    assert [a.get_attribute("class") for a in attempts] == ["attempt pass", "attempt fail"]
    assert "Attempt 2" in attempts[1].text
    assert '"answer": 41' in attempts[1].find_element(By.CSS_SELECTOR, "pre.output").text
    assert "equal" in attempts[0].find_element(By.CSS_SELECTOR, "table.scores").text
    find(By.CSS_SELECTOR, "#case-3 button.toggle").click()
    assert not detail.is_displayed()
    # a bar of the score chart opens its case
    find(By.CSS_SELECTOR, '#chart-score rect.bar[data-case="1"]').click()
    capital = find(By.CSS_SELECTOR, "#case-1 tr.detail")
    assert capital.is_displayed()
    assert capital.find_element(By.CSS_SELECTOR, "pre.output").text == "Paris"
    find(By.ID, "expand").click()
    assert (
        len([d for d in browser.find_elements(By.CSS_SELECTOR, "tr.detail") if d.is_displayed()])
        == 5
    )
    find(By.ID, "collapse").click()
    assert not [d for d in browser.find_elements(By.CSS_SELECTOR, "tr.detail") if d.is_displayed()]
    link = find(By.CSS_SELECTOR, "#case-0 a.events")
    assert link.get_attribute("href") == (tmp_path / "cases/add two numbers-0.jsonl").as_uri()
    assert console_errors(browser) == []


def test_untrusted_strings_show_as_text_in_the_browser(browser: Any, tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    open_page(browser, tmp_path, hostile_report())
    find = browser.find_element
    find(By.ID, "expand").click()
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - an alert would be open
    assert browser.title == f"{UNTRUSTED[1]}: evaluation report"
    assert find(By.CSS_SELECTOR, "#case-0 span.name").text == UNTRUSTED[0]
    assert find(By.CSS_SELECTOR, "#case-0 span.tag").text == UNTRUSTED[3]
    assert find(By.CSS_SELECTOR, "#case-0 pre.output").text == UNTRUSTED[1]
    assert find(By.CSS_SELECTOR, "#case-0 pre.error").text == UNTRUSTED[4]
    assert find(By.CSS_SELECTOR, "#case-0 td.reason").text == UNTRUSTED[2]
    injected = "img, pre *, td.reason *, span.name *, span.tag *, h1 *"
    assert browser.find_elements(By.CSS_SELECTOR, injected) == []
    assert browser.execute_script("return document.scripts.length") == 1
    # the page's script ran (the filter wrote the count), so the CSP's hash is its own
    assert find(By.ID, "shown").text == "5 of 5 cases"
    assert console_errors(browser) == []


# ---- two reports compared ---------------------------------------------------------------------


def compared() -> tuple[dict[str, Any], dict[str, Any]]:
    """The sample, and a later run: weather passes, flaky sum fails, slow answer is gone."""
    before, after = sample_report(), sample_report()
    after["name"] = "smoke-run-2"
    weather = after["cases"][2]["attempts"][0]
    weather.update(passed=True, score=1.0, tool_errors=0)
    for one in after["cases"][3]["attempts"]:
        one.update(passed=False, score=0.0)
    after["cases"][4] = case(UNTRUSTED[0], ["new"], [attempt()])
    return before, after


def test_the_comparison_page_shows_what_changed() -> None:
    page = render_compare_html(*compared())
    assert "<h1>smoke-run → smoke-run-2</h1>" in page
    kinds = dict(re.findall(r'data-name="([^"]+)" data-status="(\w+)"', page))
    assert kinds == {
        "add two numbers": "unchanged",
        "capital of France": "unchanged",
        "weather tool": "improved",
        "flaky sum": "regressed",
        "&lt;script&gt;alert(1)&lt;/script&gt;": "added",
        "slow answer": "removed",
    }
    value = r'data-card="(\w+)"><div class="label">\w+</div><div class="value">(\d+)'
    counts = {kind: number for kind, number in re.findall(value, page) if kind.islower()}
    assert counts == {
        "regressed": "1",
        "improved": "1",
        "added": "1",
        "removed": "1",
        "unchanged": "2",
    }
    # 3 of 6 attempts passed before, 4 of 6 after, and the tool error is gone
    assert (
        '<div class="value">66.7%</div><div class="dim">was 50% <span class="delta up">+16.7%'
        in page
    )
    assert 'data-card="Tool errors"' in page
    assert '<span class="delta up">-1</span>' in page  # fewer tool errors: for the better
    found = elements(page)
    assert found.scripts == [SCRIPT]
    assert "<script>alert(1)" not in page


def test_the_comparison_page_sorts_and_filters_in_the_browser(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    path = tmp_path / "compare.html"
    path.write_text(render_compare_html(*compared()), encoding="utf-8")
    browser.get(path.as_uri())
    find = browser.find_element
    Select(find(By.ID, "status")).select_by_value("regressed")
    assert shown_names(browser) == ["flaky sum"]
    Select(find(By.ID, "status")).select_by_value("")
    find(By.CSS_SELECTOR, 'th[data-key="delta"] button').click()
    assert shown_names(browser) == [
        "flaky sum",
        "add two numbers",
        "capital of France",
        "weather tool",
        UNTRUSTED[0],  # added and removed cases have no change of score: last
        "slow answer",
    ]
    assert console_errors(browser) == []
