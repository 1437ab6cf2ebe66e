"""What a browser would post from a page of plain HTML forms, for tests that drive the pages
with Django's test client: which fields a button sends depends on the form it belongs to
(``form=``, ``formaction``), and a test should follow the HTML rather than restate it."""

from __future__ import annotations

from html.parser import HTMLParser


class FormReader(HTMLParser):
    """What a browser sends when a button is pressed (the one with id ``button_id``, else the
    one whose text is ``label``): the fields of the form it belongs to (inside it, or naming it
    with ``form=``) and the address it posts to. ``type`` puts a value into a field as a person
    would, whichever form owns it. One value a name: a box is sent only when ticked, and of
    several ticked boxes of one name the last."""

    def __init__(self, button_id: str = "", *, label: str = "") -> None:
        super().__init__()
        self.button_id = button_id
        self.label = label
        self.forms: dict[str, str] = {}  # form id -> action
        self.inside: str | None = None
        self.fields: dict[str, dict[str, str]] = {}
        self.button: dict[str, str | None] = {}
        self.textarea: tuple[str, str] | None = None
        self.select: tuple[str, str] | None = None
        self.reading_button: tuple[dict[str, str | None], list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag == "form":
            self.inside = attr.get("id") or ""
            self.forms[self.inside] = attr.get("action") or ""
        owner = attr.get("form") or self.inside
        if tag == "button":
            pressed = {"form": owner, "formaction": attr.get("formaction")}
            if self.button_id and attr.get("id") == self.button_id:
                self.button = pressed
            self.reading_button = (pressed, [])
        if tag == "option" and self.select is not None:
            select_owner, select_name = self.select
            chosen = self.fields.setdefault(select_owner, {})
            if select_name not in chosen or "selected" in attr:  # the first, or the selected
                chosen[select_name] = attr.get("value") or ""
        name = attr.get("name")
        if owner is None or not name:
            return
        ticked = attr.get("type") not in ("checkbox", "radio") or "checked" in attr
        if tag == "input" and attr.get("type") != "submit" and ticked:
            self.fields.setdefault(owner, {})[name] = attr.get("value") or ""
        if tag == "textarea":
            self.textarea = (owner, name)
            self.fields.setdefault(owner, {})[name] = ""
        if tag == "select":
            self.select = (owner, name)

    def handle_data(self, data: str) -> None:
        if self.textarea is not None:
            owner, name = self.textarea
            self.fields[owner][name] += data.lstrip("\n")
        if self.reading_button is not None:
            self.reading_button[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = None
        if tag == "textarea":
            self.textarea = None
        if tag == "select":
            self.select = None
        if tag == "button" and self.reading_button is not None:
            pressed, text = self.reading_button
            if self.label and "".join(text).strip() == self.label:
                self.button = pressed
            self.reading_button = None

    def type(self, name: str, value: str) -> None:
        owners = [owner for owner, fields in self.fields.items() if name in fields]
        assert len(owners) == 1, f"no single field {name} on the page: {owners}"
        self.fields[owners[0]][name] = value

    def press(self) -> tuple[str, dict[str, str]]:
        form = self.button.get("form")
        assert form is not None, "the button belongs to no form"
        return self.button["formaction"] or self.forms[form], self.fields[form]
