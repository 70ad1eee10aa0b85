"""Recognizing pages that are obstacles rather than content: CAPTCHA / bot challenges and paywalls.

Both are access failures (AccessDeniedError): the caller records them, keeps the search snippet and,
for a paper with a DOI, tries an open-access copy (providers.fetching.open_access).
"""

from __future__ import annotations

import re

# Markup that only challenge pages carry (an article *about* CAPTCHAs does not embed these).
_CAPTCHA_MARKUP = (
    "g-recaptcha",
    "h-captcha",
    "hcaptcha.com/1/api.js",
    "www.google.com/recaptcha/api.js",
    "challenges.cloudflare.com",
    "cf-turnstile",
    "cf-challenge",
    "/cdn-cgi/challenge-platform/",
    "captcha-delivery.com",  # DataDome
    "px-captcha",  # PerimeterX
)
_CAPTCHA_PHRASES = (
    "verify you are human",
    "verify that you are human",
    "are you a robot",
    "unusual traffic from your computer network",
    "complete the security check to access",
    "please enable cookies and reload the page",
)
_CAPTCHA_TITLES = re.compile(
    r"<title[^>]*>\s*[^<]*(captcha|just a moment|attention required|are you a robot|security check|bot verification)",
    re.IGNORECASE,
)
_NOT_FREE = re.compile(r'"isAccessibleForFree"\s*:\s*"?(false|False|FALSE)"?')
_PAYWALL_PHRASES = (
    "subscribe to continue reading",
    "subscribe to read the full",
    "to continue reading, subscribe",
    "this content is for subscribers",
    "this article is for subscribers",
    "purchase this article",
    "buy this article",
    "access through your institution",
    "log in to read the full article",
    "get full access to this article",
    "rent or buy this article",
)
# Below this much extracted text, a paywall phrase means the page is a teaser, not the article.
PAYWALL_TEXT_LIMIT = 1500
SCAN_CHARS = 200_000


def is_captcha_page(html: str) -> bool:
    head = html[:SCAN_CHARS]
    lowered = head.lower()
    if any(marker in lowered for marker in _CAPTCHA_MARKUP):
        return True
    if _CAPTCHA_TITLES.search(head):
        return True
    return any(phrase in lowered for phrase in _CAPTCHA_PHRASES)


def is_paywalled(html: str, extracted_text: str) -> bool:
    head = html[:SCAN_CHARS]
    if _NOT_FREE.search(head):
        return True
    lowered = head.lower()
    return len(extracted_text) < PAYWALL_TEXT_LIMIT and any(p in lowered for p in _PAYWALL_PHRASES)
