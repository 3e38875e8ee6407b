#!/usr/bin/env python3
"""End-to-end test of the Rullama desktop app through tauri-driver (WebKitWebDriver).

Run by scripts/e2e, which provides a throwaway profile, a fake Ollama store with the tiny
fixture model and a running tauri-driver. The walk: open the app, pick the model, send a
message, watch the reply stream, stop it, regenerate, find the chat by search, restart
the app and find the history again. Screenshots of each screen go to $RULLAMA_E2E_SHOTS.

The tiny model has a made-up vocabulary, so its replies are gibberish; the test checks
that text streams and is kept, not what it says.
"""
import os
import sys
import time
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.options import ArgOptions
from selenium.webdriver.support.ui import WebDriverWait

APP = sys.argv[1]
MODEL = os.environ.get("RULLAMA_E2E_MODEL", "g3tiny:latest")
SHOTS = Path(os.environ.get("RULLAMA_E2E_SHOTS", "docs/screenshots"))
DRIVER = "http://127.0.0.1:4444"
# A word no model reply will contain, to find the chat by search.
MARKER = "quokka"
QUESTION = f"Tell me about the {MARKER} please"
TIMEOUT = 60


def session() -> webdriver.Remote:
    opts = ArgOptions()
    opts.set_capability("browserName", "wry")
    opts.set_capability("tauri:options", {"application": APP})
    return webdriver.Remote(command_executor=DRIVER, options=opts)


def invoke(d, command, args=None):
    """Call a Rust command through the app's own IPC (window.__TAURI__)."""
    result = d.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.__TAURI__.core.invoke(arguments[0], arguments[1])"
        "  .then(v => done({ok: v}), e => done({err: String(e)}));",
        command,
        args or {},
    )
    if "err" in result:
        raise AssertionError(f"{command} failed: {result['err']}")
    return result["ok"]


def testid(value):
    return (By.CSS_SELECTOR, f'[data-testid="{value}"]')


def wait(d, what, check, timeout=TIMEOUT):
    """Wait until check(d) is truthy; a stale element just means "not yet"."""
    def safe(drv):
        try:
            return check(drv)
        except (StaleElementReferenceException, WebDriverException):
            return False
    try:
        return WebDriverWait(d, timeout, poll_frequency=0.1).until(safe)
    except Exception as e:
        shot(d, f"failed-{what.replace(' ', '-')}")
        raise AssertionError(f"timed out waiting for {what}") from e


def visible(d, value):
    return [e for e in d.find_elements(*testid(value)) if e.is_displayed()]


def text_content(element):
    return element.get_attribute("textContent") or ""


def shot(d, name):
    # Let the webview paint what the DOM already shows.
    time.sleep(0.3)
    SHOTS.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(SHOTS / f"{name}.png"))
    print(f"  screenshot {name}.png")


def step(text):
    print(f"- {text}", flush=True)


def last_assistant_text(d):
    replies = visible(d, "message-assistant")
    return replies[-1].text if replies else ""


def current_chat(d):
    chats = invoke(d, "list_chats")
    assert chats, "a chat exists"
    return invoke(d, "get_chat", {"id": chats[0]["id"]})


def first_run(d):
    step("the app opens on an empty history")
    wait(d, "the UI", lambda d: visible(d, "model-picker") and visible(d, "composer-input"))
    assert invoke(d, "list_chats") == []
    assert invoke(d, "current_model") is None
    names = [m["name"] for m in invoke(d, "list_models")]
    assert MODEL in names, f"{MODEL} is listed from the fake Ollama store: {names}"
    shot(d, "01-first-run")

    step("the window may call the app's commands and listen to events, nothing else")
    outcome = d.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.__TAURI__.core.invoke('plugin:window|set_title', {label: 'main', value: 'x'})"
        "  .then(() => done('allowed'), e => done(String(e)));"
    )
    assert outcome != "allowed" and "not allowed" in outcome.lower(), outcome
    outcome = d.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.__TAURI__.event.listen('rullama-e2e', () => {})"
        "  .then(un => { un(); done('ok'); }, e => done(String(e)));"
    )
    assert outcome == "ok", outcome

    step("a chat with greedy sampling (the tiny model then writes until its context is full)")
    chat = invoke(d, "create_chat", {"model": None})
    greedy = {"temperature": 0, "top_k": 64, "top_p": 0.95, "min_p": 0, "repeat_penalty": 1, "seed": None, "max_tokens": None}
    invoke(d, "update_chat_settings", {"id": chat["id"], "systemPrompt": None, "sampling": greedy})
    d.refresh()
    wait(d, "the new chat in the list", lambda d: visible(d, "chat-list-item"))[0].click()

    step("pick the model")
    visible(d, "model-picker")[0].click()
    option = wait(d, "the model menu", lambda d: visible(d, f"model-option-{MODEL}"))[0]
    shot(d, "02-model-picker")
    option.click()
    wait(d, "the model to load", lambda d: (invoke(d, "current_model") or {}).get("name") == MODEL)
    # The backend may report the model before the window has left its loading state.
    wait(d, "the picker to show the loaded model",
         lambda d: MODEL in visible(d, "model-picker")[0].text and "Loading" not in visible(d, "model-picker")[0].text)
    print(f"  loaded on {invoke(d, 'current_model')['device']}")

    step("send a message; the reply streams")
    box = visible(d, "composer-input")[0]
    box.click()
    box.send_keys(QUESTION)
    wait(d, "the send button", lambda d: [b for b in visible(d, "send-button") if b.is_enabled()])[0].click()
    wait(d, "the user message", lambda d: any(QUESTION in e.text for e in visible(d, "message-user")))
    wait(d, "the stop button", lambda d: visible(d, "stop-button"))
    first = wait(d, "reply text", lambda d: last_assistant_text(d).strip())
    wait(d, "more reply text", lambda d: len(last_assistant_text(d)) > len(first) + 5)
    shot(d, "03-streaming")

    step("stop it")
    visible(d, "stop-button")[0].click()
    wait(d, "the stop button to go", lambda d: not visible(d, "stop-button"))
    chat = current_chat(d)
    replies = [m for m in chat["messages"] if m["role"] == "assistant"]
    assert len(replies) == 1 and replies[0]["status"] == "incomplete", replies
    stopped_text = replies[0]["content"]
    assert stopped_text.strip(), "the stopped reply kept its text"
    # Stopped well before the 512-token context of the tiny model ran out.
    assert (replies[0]["reply_tokens"] or 0) < 400, replies[0]
    shot(d, "04-stopped")

    step("regenerate: a second reply to the same message, the first one kept")
    wait(d, "the regenerate button", lambda d: visible(d, "regenerate-button"))[-1].click()
    wait(d, "the second reply to start", lambda d: len([m for m in current_chat(d)["messages"] if m["role"] == "assistant"]) == 2)
    wait(d, "the stop button", lambda d: visible(d, "stop-button"))
    wait(d, "regenerated text", lambda d: last_assistant_text(d).strip())
    visible(d, "stop-button")[0].click()
    wait(d, "the stop button to go", lambda d: not visible(d, "stop-button"))
    chat = current_chat(d)
    replies = [m for m in chat["messages"] if m["role"] == "assistant"]
    assert len(replies) == 2 and replies[0]["parent_id"] == replies[1]["parent_id"], replies
    assert replies[0]["content"] == stopped_text, "the first branch is unchanged"
    shot(d, "05-regenerated")

    step("search finds the chat")
    search = visible(d, "search-input")[0]
    search.click()
    search.send_keys(MARKER)
    hits = wait(d, "search results", lambda d: visible(d, "search-result"))
    assert any(MARKER in h.text for h in hits), [h.text for h in hits]
    assert invoke(d, "search_chats", {"query": MARKER}), "the search command finds it too"
    shot(d, "06-search")
    return chat


def after_restart(d, before):
    step("after a restart the history is there")
    # Titles are cut with an ellipsis by CSS, so match on the full text content.
    items = wait(d, "the chat in the list", lambda d: [i for i in visible(d, "chat-list-item") if MARKER in text_content(i)])
    chat = current_chat(d)
    assert [m["content"] for m in chat["messages"]] == [m["content"] for m in before["messages"]]
    assert all(m["status"] in ("complete", "incomplete") for m in chat["messages"])
    items[0].click()
    wait(d, "the conversation", lambda d: any(QUESTION in e.text for e in visible(d, "message-user")))
    wait(d, "the reply", lambda d: visible(d, "message-assistant"))
    shot(d, "07-after-restart")

    step("settings")
    buttons = [b for b in d.find_elements(By.XPATH, "//button[contains(normalize-space(.), 'Settings')]") if b.is_displayed()]
    if buttons:
        buttons[0].click()
        time.sleep(0.5)
        shot(d, "08-settings")
    else:
        print("  (no Settings button found; skipped that screenshot)")


def main():
    d = session()
    try:
        d.set_window_size(1280, 860)
        before = first_run(d)
    finally:
        d.quit()
    d = session()
    try:
        d.set_window_size(1280, 860)
        after_restart(d, before)
    finally:
        d.quit()
    print("E2E PASS")


if __name__ == "__main__":
    main()
