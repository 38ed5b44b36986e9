"""Accounts, the admin page and settings in the browser, against a real server: an admin
makes a user and a shared profile; the user makes an API token (it works with Bearer, then
stops when revoked), adds an MCP server that cannot be reached (a persistent error, not a
500), changes their password (their other session and tokens end; the old password stops
working at the login page). In the local mode: a profile edited (its keys kept), its
fallbacks and review; every other setting saved through the Settings screen; an MCP server's
tools listed and switched one by one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Route, expect

from tools._mcp_server import serve_http

from ._site import Site
from .conftest import screenshot

PASSWORD = "correct horse battery"
NEW_PASSWORD = "a brand new passphrase"
SHARED_KEY = "sk-house-SECRET-0123456789"
MCP_TOKEN = "mcp-SECRET-token-0123456789"


@pytest.fixture
def accounts_site(tmp_path: Path) -> Iterator[Site]:
    with Site(tmp_path / "home", accounts=True) as running:
        running.call(running.server.state.accounts.create_user("root", PASSWORD, is_admin=True))
        yield running


def _context(browser: Browser, site: Site, **options: object) -> BrowserContext:
    context = browser.new_context(base_url=site.url, **options)  # type: ignore[arg-type]
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.url)
    context.set_default_timeout(10_000)
    return context


def _sign_in(page: Page, name: str, password: str) -> None:
    page.goto("/#/login")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Characters")).to_be_visible()


def _bearer(site: Site, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(f"{site.url}/auth/me", headers=headers, timeout=10).status_code


def test_an_admin_makes_a_user_who_manages_their_account(
    browser: Browser, accounts_site: Site
) -> None:
    site = accounts_site
    admin = _context(browser, site)
    try:
        page = admin.new_page()
        _sign_in(page, "root", PASSWORD)
        nav = page.get_by_role("navigation")
        expect(nav.get_by_role("link", name="Admin")).to_be_visible()
        nav.get_by_role("link", name="Admin").click()
        page.get_by_label("User name").fill("ann")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_role("button", name="Create user").click()
        expect(page.locator('tr[data-user="ann"]')).to_contain_text("user")
        # a shared profile: its key is write-only
        shared = page.get_by_role("region", name="Shared connection profiles")
        shared.get_by_label("Profile name").fill("house")
        shared.get_by_label("Base URL").fill(site.upstream.base_url + "/v1")
        shared.get_by_label("Model").fill("house-model")
        shared.get_by_label("API key").fill(SHARED_KEY)
        shared.get_by_role("button", name="Add profile").click()
        expect(shared.locator('tr[data-profile="house"]')).to_contain_text("house-model")
        assert SHARED_KEY not in page.content()
        state = site.server.state
        assert state.shared is not None
        summaries = site.call(state.shared.server.profiles.summaries())
        assert [s.name for s in summaries] == ["house"] and len(summaries[0].keys) == 1
        # a password is refused by name when too short
        page.get_by_label("User name").fill("bob")
        page.get_by_label("Password", exact=True).fill("short")
        page.get_by_label("Password", exact=True).evaluate(
            "input => input.removeAttribute('minlength')"
        )
        page.get_by_role("button", name="Create user").click()
        expect(page.get_by_role("region", name="Users").get_by_role("alert")).to_contain_text(
            "password"
        )
        page.get_by_role("button", name="Dismiss").click()
        # a user's password reset (it signs them out), then the user deleted after a confirm
        page.get_by_label("User name").fill("carol")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_role("button", name="Create user").click()
        carol = page.locator('tr[data-user="carol"]')
        expect(carol).to_be_visible()
        carol_id = site.call(state.accounts.store.find_user("carol"))[0].id
        issued = site.call(state.accounts.issue_token(carol_id, "carol's"))
        carol.get_by_role("button", name="Reset password of carol").click()
        carol.get_by_label("New password for carol").fill(NEW_PASSWORD)
        carol.get_by_role("button", name="Save password").click()
        expect(page.get_by_role("region", name="Users").get_by_role("status")).to_contain_text(
            "carol's password is set"
        )
        assert _bearer(site, issued.token) == 401
        site.call(state.accounts.authenticate("carol", NEW_PASSWORD))
        expect(page.get_by_role("button", name="Delete root")).to_have_count(0)  # not oneself
        carol.get_by_role("button", name="Delete carol").click()
        records = carol.get_by_label("Records of carol")
        expect(records.locator("option")).to_have_text(
            ["Delete them", "Hand them to ann", "Hand them to root"]
        )
        page.once("dialog", lambda dialog: dialog.accept())
        carol.get_by_role("button", name="Confirm deleting carol").click()
        expect(carol).to_have_count(0)
        screenshot(page, "admin")
    finally:
        admin.close()

    # ann signs in twice: this browser and another one (the session a password change ends)
    elsewhere = _context(browser, site)
    user = _context(browser, site)
    try:
        other_page = elsewhere.new_page()
        _sign_in(other_page, "ann", PASSWORD)
        page = user.new_page()
        _sign_in(page, "ann", PASSWORD)
        nav = page.get_by_role("navigation")
        expect(nav.get_by_role("link", name="Admin")).to_be_hidden()
        nav.get_by_role("link", name="Account").click()
        expect(page.get_by_role("heading", name="Account")).to_be_visible()
        expect(page.get_by_text("Signed in as ann.")).to_be_visible()

        # an API token: shown once, copied, working with Bearer, then revoked
        tokens = page.get_by_role("region", name="API tokens")
        tokens.get_by_label("Token name").fill("script")
        tokens.get_by_role("button", name="Create token").click()
        expect(tokens.get_by_text("You will not see it again")).to_be_visible()
        token = tokens.get_by_label("New token").input_value()
        assert token.startswith("tk_")
        tokens.get_by_role("button", name="Copy").click()
        assert page.evaluate("navigator.clipboard.readText()") == token
        assert _bearer(site, token) == 200
        tokens.get_by_role("button", name="Done").click()
        expect(tokens.get_by_label("New token")).to_have_count(0)
        page.reload()
        row = page.locator("tr[data-token]", has_text="script")
        expect(row).to_be_visible()
        expect(row.locator("td").nth(2)).not_to_have_text("never")  # its last use is shown
        assert token not in page.content()
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Revoke script").click()
        expect(page.locator("tr[data-token]")).to_have_count(0)
        assert _bearer(site, token) == 401
        # a second token, for the password change to revoke
        tokens.get_by_label("Token name").fill("bot")
        tokens.get_by_role("button", name="Create token").click()
        bot = tokens.get_by_label("New token").input_value()
        tokens.get_by_role("button", name="Done").click()

        # an MCP server that cannot be reached: added, and its error stays in view
        mcp = page.get_by_role("region", name="MCP servers")
        expect(mcp.get_by_label("Transport").locator("option")).to_have_count(1)  # no stdio
        mcp.get_by_label("Server name").fill("gone")
        # a loopback address is the server's own machine: the egress policy refuses it
        mcp.get_by_label("URL").fill("http://127.0.0.1:9/mcp")
        mcp.get_by_label("Token").fill(MCP_TOKEN)
        mcp.get_by_role("button", name="Add server").click()
        expect(mcp.get_by_role("alert").first).to_contain_text("egress policy refuses")
        expect(mcp.locator('[data-server="gone"]')).to_have_count(0)
        mcp.get_by_label("URL").fill("http://mcp.invalid/mcp")  # never resolves
        mcp.get_by_label("Token").fill(MCP_TOKEN)
        mcp.get_by_role("button", name="Add server").click()
        card = mcp.locator('[data-server="gone"]')
        alert = card.get_by_role("alert")
        expect(alert).to_contain_text("Could not reach gone")
        expect(alert).to_contain_text("502")
        expect(card).to_contain_text("Credential: mcp:gone (")
        assert MCP_TOKEN not in page.content()
        expect(mcp.get_by_label("Token")).to_have_value("")
        alert.get_by_role("button", name="Retry").click()
        expect(card.get_by_role("alert")).to_contain_text("Could not reach gone")
        page.wait_for_timeout(6500)  # past a toast's life: the error is still there
        expect(card.get_by_role("alert")).to_be_visible()
        page.set_viewport_size({"width": 390, "height": 844})
        screenshot(page, "account-phone")
        page.set_viewport_size({"width": 1280, "height": 720})
        screenshot(page, "account")
        card.get_by_role("button", name="Turn off gone").click()
        expect(card.locator(".badge")).to_have_text("off")
        expect(card).to_contain_text("Turn the server on to list its tools.")

        # the password: a wrong current one changes nothing
        password = page.get_by_role("region", name="Password")
        password.get_by_label("Current password").fill("not my password")
        password.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
        password.get_by_label("New password again").fill(NEW_PASSWORD)
        password.get_by_role("button", name="Change password").click()
        expect(password.get_by_role("alert")).to_contain_text("current password is wrong")
        assert _bearer(site, bot) == 200
        password.get_by_role("button", name="Dismiss").click()
        password.get_by_label("Current password").fill(PASSWORD)
        password.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
        password.get_by_label("New password again").fill(NEW_PASSWORD)
        password.get_by_role("button", name="Change password").click()
        expect(password.get_by_role("status")).to_contain_text("Password changed")
        expect(tokens.get_by_text("No API tokens.")).to_be_visible()
        assert _bearer(site, bot) == 401
        # this session stays; the other browser's is signed out
        page.reload()
        expect(page.get_by_role("heading", name="Account")).to_be_visible()
        other_page.goto("/#/account")
        other_page.wait_for_url(re.compile("#/login$"))

        # settings made in the UI reach /settings (ann's own)
        page.goto("/#/settings")
        page.get_by_label("Your name").fill("Ann Lee")
        page.get_by_role("button", name="Save name").click()
        expect(page.locator("#toast")).to_have_text("Chats call you Ann Lee")
        page.get_by_label("Trim incomplete sentences").check()
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#toast")).to_have_text("Settings saved")
        settings = page.evaluate("fetch('/settings').then((r) => r.json())")
        assert settings["prompt"]["trim_sentences"] is True
        ann, _ = site.call(site.server.state.accounts.store.find_user("ann"))
        stored = site.call(site.tk.for_owner(ann.owner).settings())
        assert stored.selections.user_name == "Ann Lee" and stored.prompt.trim_sentences
        assert not site.call(site.tk.settings()).prompt.trim_sentences  # the admin's are not

        # signed out, the old password no longer opens the account; the new one does
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(re.compile("#/login$"))
        page.get_by_label("Name").fill("ann")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#toast")).to_contain_text("401")
        expect(page).to_have_url(re.compile("#/login$"))
        _sign_in(page, "ann", NEW_PASSWORD)
    finally:
        user.close()
        elsewhere.close()


def test_a_profile_is_edited_with_its_keys_kept_and_gets_fallbacks_and_review(
    page: Page, site: Site
) -> None:
    secret = "sk-edit-VERYSECRET-0123456789"
    page.goto("/#/settings")
    profiles = page.get_by_role("region", name="Connection profiles")
    profiles.get_by_label("Profile name").fill("main")
    profiles.get_by_label("API", exact=True).select_option("chat")
    profiles.get_by_label("Base URL").fill(site.upstream.base_url + "/v1")
    profiles.get_by_label("Model", exact=True).fill("m1")
    profiles.get_by_label("API key").fill(secret)
    profiles.get_by_label("First byte timeout (s)").fill("200")
    profiles.get_by_role("button", name="Add profile").click()
    row = profiles.locator('tr[data-profile="main"]')
    expect(row).to_contain_text("first byte 200s")
    keys = site.call(site.tk.profiles.summaries())
    before = next(s for s in keys if s.name == "main").keys

    profiles.get_by_role("button", name="Edit main").click()
    form = profiles.get_by_role("form", name="Edit profile main")
    expect(form.get_by_label("Profile name")).to_have_attribute("readonly", "")
    expect(form.get_by_label("Model", exact=True)).to_have_value("m1")
    form.get_by_label("Model", exact=True).fill("m2")
    form.get_by_label("Response review").select_option("pin:scripted")
    form.get_by_label("Reviewer's model (optional)").fill("judge-1")
    form.get_by_role("button", name="Save profile").click()
    expect(row).to_contain_text("m2")
    expect(row).to_contain_text("review: scripted:judge-1")
    stored = site.call(site.tk.profiles.get("main"))
    assert stored.model == "m2" and stored.review is not None
    assert stored.review.reviewer_profile == "scripted"
    after = next(s for s in site.call(site.tk.profiles.summaries()) if s.name == "main").keys
    assert after == before  # the key stayed, unseen

    # the fallback chain: added, randomized, refused by name, removed
    profiles.get_by_role("button", name="Edit main").click()
    chain = profiles.get_by_role("group", name="Fallbacks of main")
    chain.get_by_label("Fallback profile").select_option("scripted")
    chain.get_by_role("button", name="Add fallback").click()
    expect(row).to_contain_text("fallbacks: scripted")
    chain = profiles.get_by_role("group", name="Fallbacks of main")
    chain.get_by_label("Fallback profile").select_option("main")
    chain.get_by_role("button", name="Add fallback").click()
    expect(profiles.get_by_role("alert")).to_contain_text("cannot be its own fallback")
    chain.get_by_label("Randomize the lead each turn").check()
    expect(row).to_contain_text("(randomized)")
    assert [e.profile for e in site.call(site.tk.profiles.fallbacks("main"))] == ["scripted"]
    screenshot(page, "settings-profile-edit")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "settings-phone")
    page.set_viewport_size({"width": 1280, "height": 720})
    profiles.get_by_role("group", name="Fallbacks of main").get_by_role(
        "button", name="Remove fallback scripted"
    ).click()
    expect(row).not_to_contain_text("fallbacks:")
    assert secret not in page.content()

    # make it active, then back to the one the module's other tests use
    profiles.get_by_role("button", name="Make main active").click()
    expect(row).to_contain_text("main (active)")
    assert site.call(site.tk.settings()).selections.profile == "main"
    profiles.get_by_role("button", name="Make scripted active").click()
    expect(profiles.locator('tr[data-profile="scripted"]')).to_contain_text("(active)")
    page.once("dialog", lambda dialog: dialog.accept())
    profiles.get_by_role("button", name="Delete main").click()
    expect(row).to_have_count(0)


def test_every_setting_section_saves_what_changed(page: Page, site: Site) -> None:
    before = site.call(site.tk.settings())
    page.goto("/#/settings")
    page.get_by_label("Character lore insertion").select_option("2")
    page.get_by_label("Group scoring").check()
    page.get_by_label("Instruct template").fill("ChatML")
    page.get_by_label("Persona description position (default)").select_option("4")
    page.get_by_label("Custom stopping strings (JSON list)").fill('["\\nUser:"]')
    page.get_by_label("Reasoning blocks sent back (max)").fill("3")
    page.get_by_label("Show hidden reasoning").check()
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("#toast")).to_have_text("Settings saved")
    stored = site.call(site.tk.settings())
    assert stored.world_info.character_strategy == 2 and stored.world_info.use_group_scoring
    assert stored.prompt.instruct_template == "ChatML"
    assert stored.prompt.persona_description_position == 4
    assert stored.prompt.custom_stopping_strings == '["\\nUser:"]'
    assert stored.reasoning.max_additions == 3 and stored.reasoning.show_hidden
    assert stored.world_info.depth == before.world_info.depth  # untouched keys stay

    # memory: drawn when opened, saved key by key, a bad value named
    page.get_by_text("Memory", exact=True).click()
    memory = page.get_by_role("form", name="Memory settings")
    memory.get_by_label("Summarize").select_option("main")
    memory.get_by_label("Summary length (words)").fill("120")
    memory.get_by_label("Chat memory (vectorize messages)").check()
    memory.get_by_label("Embedder").select_option("profile:scripted")
    memory.get_by_label("Embedding model (profiles only)").fill("embed-1")
    memory.get_by_role("button", name="Save memory settings").click()
    expect(page.locator("#toast")).to_have_text("Memory settings saved")
    saved = site.call(site.tk.settings()).memory
    assert saved.summary.source == "main" and saved.summary.prompt_words == 120
    assert saved.vectors.enabled_chats and saved.vectors.embedder == "profile:scripted"
    assert saved.vectors.embedding_model == "embed-1"
    memory = page.get_by_role("form", name="Memory settings")
    memory.get_by_label("Summary length (words)").fill("")
    memory.get_by_role("button", name="Save memory settings").click()
    expect(page.locator(".settings-more").get_by_role("alert")).to_contain_text("summary")
    assert site.call(site.tk.settings()).memory == saved
    screenshot(page, "settings-all")
    site.call(site.tk.store.put_settings(before, owner=site.tk.owner))


def test_a_saved_settings_form_takes_no_edits_until_it_shows_what_was_stored(
    page: Page, site: Site
) -> None:
    """A save draws the form again from the server; an edit typed before that would go into
    the form being replaced (and a second save find nothing changed), so the form takes none
    until it is redrawn, and "saved" shows only then."""
    before = site.call(site.tk.settings())
    page.goto("/#/settings")
    page.get_by_text("Memory", exact=True).click()
    memory = page.get_by_role("form", name="Memory settings")
    memory.get_by_label("Summary length (words)").fill("140")
    held: list[Route] = []  # the redraw's reads, answered when the test says
    page.route("**/memory/settings", lambda route: _hold_reads(route, held))
    memory.get_by_role("button", name="Save memory settings").click()
    expect(page.locator("form[aria-label='Memory settings'][inert]")).to_have_count(1)
    for _ in range(500):  # the save's PATCH answered, its redraw asks (at most 10 s)
        if held:
            break
        page.wait_for_timeout(20)
    assert held, "the form was not drawn again after its save"
    assert site.call(site.tk.settings()).memory.summary.prompt_words == 140
    expect(page.locator("#toast")).not_to_have_text("Memory settings saved")
    for route in held:
        route.continue_()
    page.unroute("**/memory/settings")
    expect(page.locator("#toast")).to_have_text("Memory settings saved")
    memory = page.get_by_role("form", name="Memory settings")
    expect(memory).not_to_have_attribute("inert", "")
    expect(memory.get_by_label("Summary length (words)")).to_have_value("140")
    memory.get_by_label("Summary length (words)").fill("150")
    memory.get_by_role("button", name="Save memory settings").click()
    expect(page.locator("#toast")).to_have_text("Memory settings saved")
    assert site.call(site.tk.settings()).memory.summary.prompt_words == 150
    site.call(site.tk.store.put_settings(before, owner=site.tk.owner))


def _hold_reads(route: Route, held: list[Route]) -> None:
    if route.request.method == "GET":
        held.append(route)
    else:
        route.continue_()


def test_an_mcp_servers_tools_are_listed_and_switched(page: Page, site: Site) -> None:
    serving = serve_http(token=MCP_TOKEN)
    url, seen = site.call(serving.__aenter__())
    try:
        page.goto("/#/account")
        expect(page.get_by_text("Local mode: one user, no sign-in.")).to_be_visible()
        expect(page.get_by_role("region", name="API tokens")).to_have_count(0)
        mcp = page.get_by_role("region", name="MCP servers")
        mcp.get_by_label("Server name").fill("tools")
        mcp.get_by_label("URL").fill(url)
        mcp.get_by_label("Token").fill(MCP_TOKEN)
        mcp.get_by_role("button", name="Add server").click()
        card = mcp.locator('[data-server="tools"]')
        expect(card.get_by_label("shout")).to_be_checked()
        assert f"Bearer {MCP_TOKEN}" in seen.authorizations
        card.get_by_label("shout").uncheck()
        expect(page.locator("#toast")).to_have_text("shout not offered")
        server = site.call(site.tk.mcp.registrations())[0]
        assert server.disabled_tools == ["shout"]
        page.reload()
        card = page.locator('[data-server="tools"]')
        card.get_by_role("button", name="Tools of tools").click()
        expect(card.get_by_label("shout")).not_to_be_checked()
        expect(card.get_by_label("add", exact=True)).to_be_checked()
        card.get_by_label("shout").check()
        expect(page.locator("#toast")).to_have_text("shout offered")
        assert site.call(site.tk.mcp.registrations())[0].disabled_tools == []
        # stdio is offered in the local mode (one user, who is the admin)
        expect(mcp.get_by_label("Transport").locator("option")).to_have_count(2)
        page.once("dialog", lambda dialog: dialog.accept())
        card.get_by_role("button", name="Delete tools").click()
        expect(card).to_have_count(0)
        assert site.call(site.tk.mcp.registrations()) == []
    finally:
        site.call(serving.__aexit__(None, None, None))
