"""The installable app: the page links a valid web app manifest with its icons, the service
worker registers and controls the page, Chromium finds the app installable, the cache holds the
shell and never API data, and with the server gone a reload opens the cached UI on a clear
"Server unreachable" screen."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from PIL import Image
from playwright.sync_api import expect

from ._site import Site
from .conftest import CHROMIUM, CHROMIUM_ARGS, screenshot

SHELL_FILE = re.compile(r"^/(ui/([\w-]+/)?[\w.-]+\.(js|json|css|png|svg|webmanifest))?$")
DESKTOP = {"width": 1280, "height": 720}
PHONE = {"width": 390, "height": 844}


def controlled(page: Any) -> None:
    """Wait until the service worker is active, then reload so it controls the page."""
    page.goto("/")
    page.evaluate("navigator.serviceWorker.ready.then(() => true)")
    page.reload()
    page.wait_for_function("navigator.serviceWorker.controller !== null")


def cached_paths(page: Any) -> list[str]:
    return page.evaluate(
        """async () => {
            const out = [];
            for (const name of await caches.keys()) {
                const cache = await caches.open(name);
                for (const request of await cache.keys()) out.push(new URL(request.url).pathname);
            }
            return out.sort();
        }"""
    )


def test_the_manifest_is_linked_valid_and_its_icons_are_served(page: Any, site: Site) -> None:
    page.goto("/")
    href = page.locator("link[rel=manifest]").get_attribute("href")
    assert href == "/ui/manifest.webmanifest"
    answer = page.request.get(href)
    assert answer.ok and answer.headers["content-type"] == "application/manifest+json"
    manifest = json.loads(answer.body())
    assert manifest["name"] == "tavernkit" and manifest["display"] == "standalone"
    assert manifest["start_url"] == "/" and manifest["scope"] == "/"
    sizes = set()
    for icon in manifest["icons"]:
        image = page.request.get(icon["src"])
        assert image.ok and image.headers["content-type"] == "image/png"
        width, height = Image.open(io.BytesIO(image.body())).size
        assert f"{width}x{height}" == icon["sizes"]
        sizes.add((icon["sizes"], icon["purpose"]))
    assert {("192x192", "any"), ("512x512", "any"), ("512x512", "maskable")} <= sizes
    # Chromium's own reading of it: no errors
    cdp = page.context.new_cdp_session(page)
    read = cdp.send("Page.getAppManifest")
    assert read["url"].endswith("/ui/manifest.webmanifest")
    assert [e for e in read["errors"] if e.get("critical")] == [], read["errors"]
    assert read["errors"] == [], read["errors"]


def test_the_service_worker_registers_and_the_app_is_installable(
    browser: Any, site: Site, tmp_path: Path
) -> None:
    # a profile on disk: Chromium offers no install in an incognito context (a new_context)
    context = browser.browser_type.launch_persistent_context(
        str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, base_url=site.url
    )
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)
        controlled(page)
        script = page.evaluate("navigator.serviceWorker.controller.scriptURL")
        assert script == f"{site.url}/sw.js"
        cdp = context.new_cdp_session(page)
        errors = cdp.send("Page.getInstallabilityErrors")["installabilityErrors"]
        assert errors == [], errors
        # the CSP the page is served with allows the worker and the manifest ('self')
        csp = page.request.get("/").headers["content-security-policy"]
        assert "default-src 'self'" in csp and "worker-src" not in csp
    finally:
        context.close()


def test_the_cache_holds_the_shell_and_never_api_data(page: Any, site: Site) -> None:
    controlled(page)
    page.goto("/#/settings")
    expect(page.get_by_role("heading", name="Backups")).to_be_visible()
    page.goto("/#/")
    expect(page.get_by_text("Mira").first).to_be_visible()
    paths = cached_paths(page)
    assert "/" in paths and "/ui/app.js" in paths and "/ui/chat/screen.js" in paths
    assert "/ui/icons/icon-512.png" in paths and "/ui/manifest.webmanifest" in paths
    assert [p for p in paths if not SHELL_FILE.match(p)] == []  # no /auth/me, /characters...
    assert "/shell.json" not in paths and "/sw.js" not in paths


def test_offline_the_app_opens_to_server_unreachable(browser: Any, tmp_path: Path) -> None:
    site = Site(tmp_path / "home")
    with site:
        context = browser.new_context(base_url=site.url)
        page = context.new_page()
        page.set_default_timeout(10_000)
        controlled(page)
        expect(page.get_by_text("Mira").first).to_be_visible()
    try:
        # the server is gone: the cached shell opens, and says what happened
        page.set_viewport_size(DESKTOP)
        page.reload()
        alert = page.get_by_role("alert", name="Server unreachable")
        expect(alert.get_by_role("heading", name="Server unreachable")).to_be_visible()
        expect(alert).to_contain_text("nothing is lost")
        screenshot(page, "offline-unreachable-desktop")
        page.set_viewport_size(PHONE)
        expect(alert.get_by_role("button", name="Retry")).to_be_visible()
        screenshot(page, "offline-unreachable-phone")
        # Retry while still unreachable: the same screen, no stray error
        alert.get_by_role("button", name="Retry").click()
        expect(page.get_by_role("heading", name="Server unreachable")).to_be_visible()
        # the browser itself offline: the same
        context.set_offline(True)
        page.goto("/#/settings")
        page.reload()
        expect(page.get_by_role("heading", name="Server unreachable")).to_be_visible()
    finally:
        context.close()
