"""The dashboard in a real headless browser: click from the run to a rollout to a call, and check that
what the page shows is what the store holds. Screenshots go to test-artifacts/ui/."""

from __future__ import annotations

from harnessrl.store import Store
from harnessrl.ui import dashboard_app

from .browser import browser_page, needs_browser, serve, shot
from .fixture_data import Fixture


@needs_browser
def test_click_run_rollout_call(store: Store, fx: Fixture, store_url: str) -> None:
    with serve(dashboard_app(store, store_url=store_url, tokenizer="none")) as url, browser_page() as page:
        page.goto(url + "/")
        page.click(f"a[href='/runs/{fx.run_id}']")
        page.wait_for_selector("#run-id")
        assert page.inner_text("#run-id") == fx.run_id
        assert page.locator("#reward-chart svg polyline").count() == 2  # train and held-out curves
        shown = page.locator("#rollouts tbody tr").evaluate_all("rows => rows.map(r => r.dataset.rollout)")
        assert shown == [r.id for r in store.list_rollouts(run_id=fx.run_id)]
        shot(page, "1-run")

        # filter the run's rollouts to the failed one through the form
        page.select_option("#filters select[name=status]", "failed")
        page.click("#filters button[type=submit]")
        page.wait_for_url("**status=failed**")
        failed = [r.id for r in store.list_rollouts(run_id=fx.run_id) if r.status.value == "failed"]
        assert page.locator("#rollouts tbody tr").evaluate_all("rs => rs.map(r => r.dataset.rollout)") == failed
        page.go_back()

        page.click(f"a.rollout-link[href='/rollouts/{fx.rich}']")
        page.wait_for_selector("#rollout-id")
        rollout = store.get_rollout(fx.rich)
        assert page.inner_text("#rollout-status") == rollout.status.value
        assert page.inner_text("#rollout-task") == rollout.task_id
        calls = store.get_calls(fx.rich)
        assert page.locator("#calls tbody tr").count() == len(calls)
        assert page.locator("#samples tbody tr").count() == 2
        assert page.inner_text("#logs") == rollout.logs  # the XSS payload shown as text
        shot(page, "2-rollout")

        page.click("#calls a.call-link >> text='call 1'")
        page.wait_for_selector("#tokens")
        call = store.get_call(fx.rich, 1)
        assert page.inner_text("#fidelity").startswith(call.fidelity.value)
        assert call.fidelity_reason in page.inner_text("#fidelity-reason")
        ids = page.locator("#completion-tokens .tok").evaluate_all("ts => ts.map(t => Number(t.dataset.id))")
        assert ids == call.completion_token_ids
        lps = page.locator("#completion-tokens .tok").evaluate_all("ts => ts.map(t => Number(t.dataset.logprob))")
        assert [round(x, 3) for x in lps] == [round(x, 3) for x in call.completion_logprobs]
        assert page.locator("#prompt-tokens .tok").count() == len(call.prompt_token_ids)
        # colours: trained tokens green under the mask view, then the logprob view on click
        mask_bg = page.locator("#completion-tokens .tok").first.evaluate("t => getComputedStyle(t).backgroundColor")
        assert mask_bg == "rgb(187, 247, 208)"
        shot(page, "3-call-mask")
        page.click("#mode-lp")
        assert "by-lp" in (page.get_attribute("#tokens", "class") or "")
        lp_bg = page.locator("#completion-tokens .tok").first.evaluate("t => getComputedStyle(t).backgroundColor")
        assert lp_bg == "rgb(254, 202, 202)"  # logprob -3.0: an unlikely token
        shot(page, "4-call-logprob")
        assert page.evaluate("window.__pwned") is None  # no script from the prompt ran

        page.click("#back-to-rollout")
        page.wait_for_selector("#rollout-id")
        assert page.evaluate("window.__pwned") is None
