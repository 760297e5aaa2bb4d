"""Textual screens of the console (modal dialogs, help, evidence, fleet)."""
