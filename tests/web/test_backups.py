"""Settings > Backups: a user sees when the last verified backup of the server's data was made
and how often the server backs up; with none yet, that there is none and how to turn them on;
a scheduled backup that failed, as an alert with its reason (the local user is the admin)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from ._site import Site
from .conftest import screenshot

DESKTOP = {"width": 1280, "height": 720}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    # every hour: the first backup is made as the server starts (there is none yet)
    home = tmp_path_factory.mktemp("web-backups") / "home"
    with Site(home, backup_every_s=3600.0) as running:
        yield running


def backups_section(page: Any) -> Any:
    return page.get_by_role("region", name="Backups")


def test_settings_show_the_last_verified_backup(page: Any, site: Site) -> None:
    schedule = site.server.state.backups
    assert schedule is not None
    deadline = 200
    while schedule.last is None and deadline:  # the first backup runs as the server starts
        page.wait_for_timeout(50)
        deadline -= 1
    assert schedule.last is not None
    page.set_viewport_size(DESKTOP)
    page.goto("/#/settings")
    section = backups_section(page)
    expect(
        section.get_by_text(re.compile(r"^Last verified backup: .+\(just now\)$"))
    ).to_be_visible()
    expect(section.get_by_text("The server backs up every 1 h; the next one")).to_be_visible()
    section.scroll_into_view_if_needed()
    screenshot(page, "settings-backups-desktop")
    page.set_viewport_size(PHONE)
    section.scroll_into_view_if_needed()
    expect(section.get_by_text(re.compile("^Last verified backup"))).to_be_visible()
    screenshot(page, "settings-backups-phone")


def test_no_backup_yet_says_how_to_turn_them_on(browser: Any, tmp_path: Path) -> None:
    with Site(tmp_path / "home", scripted=False) as bare:
        context = browser.new_context(base_url=bare.url)
        try:
            page = context.new_page()
            page.goto("/#/settings")
            section = backups_section(page)
            expect(section.get_by_text("No verified backup yet.")).to_be_visible()
            expect(section.get_by_text(re.compile("--backup-every 6h"))).to_be_visible()
        finally:
            context.close()


def test_a_failed_scheduled_backup_is_an_alert(browser: Any, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the backups should go")
    with Site(tmp_path / "home", scripted=False, backup_every_s=60.0, backup_dir=blocked) as s:
        context = browser.new_context(base_url=s.url)
        try:
            page = context.new_page()
            schedule = s.server.state.backups
            assert schedule is not None
            for _ in range(200):
                if schedule.last_error is not None:
                    break
                page.wait_for_timeout(50)
            page.goto("/#/settings")
            alert = backups_section(page).get_by_role("alert")
            expect(alert).to_contain_text("The last scheduled backup failed: cannot write")
            expect(backups_section(page).get_by_text("No verified backup yet.")).to_be_visible()
        finally:
            context.close()
