"""The console's dialogs: confirm an action (it names what will happen), a prompt for an
action's input, and a text pane (help, describe, a key's history)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static


class ConfirmScreen(ModalScreen[bool]):
    """y / enter on "Yes" confirms; n / esc cancels."""

    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n", "answer(False)", "no"),
                Binding("escape", "answer(False)", "cancel")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Confirm", classes="dialog-title")
            yield Static(escape(self.question), id="question")
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class PromptScreen(ModalScreen[dict | None]):
    """Named fields; enter in the last field submits, esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, fields: Sequence[tuple[str, str, str]]) -> None:
        """fields: (name, label, initial value)."""
        super().__init__()
        self.title_text = title
        self.fields = list(fields)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            for name, label, value in self.fields:
                yield Label(label)
                yield Input(value=value, id=f"field-{name}")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        i = inputs.index(event.input)
        if i + 1 < len(inputs):
            inputs[i + 1].focus()
            return
        self.dismiss({name: self.query_one(f"#field-{name}", Input).value
                      for name, _, _ in self.fields})

    def action_cancel(self) -> None:
        self.dismiss(None)


class TextScreen(ModalScreen[None]):
    """A scrollable text pane; esc or q closes it."""

    BINDINGS = [Binding("escape", "close", "close"), Binding("q", "close", "close")]

    def __init__(self, title: str, text: str, markup: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.text = text
        self.markup = markup

    def compose(self) -> ComposeResult:
        with Vertical(id="pane"):
            yield Label(f"{self.title_text}   (esc closes)", classes="dialog-title")
            with VerticalScroll():
                yield Static(self.text if self.markup else escape(self.text), id="pane-text")

    def action_close(self) -> None:
        self.dismiss(None)
