// A "Copy" button for a value shown once (a new API token). The button names the field it
// copies (data-copy) and the status line that says what happened (data-copy-status). Without
// JavaScript the button stays hidden and the field, read-only, is selected and copied by hand.
for (const button of document.querySelectorAll("button[data-copy]")) {
  const field = document.getElementById(button.dataset.copy);
  const status = document.getElementById(button.dataset.copyStatus);
  if (!field) continue;
  const holder = button.closest("[hidden]");
  if (holder) holder.hidden = false;
  button.addEventListener("click", async () => {
    let copied = false;
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(field.value);
        copied = true;
      } catch (error) {
        copied = false;
      }
    }
    if (!copied) {
      // Plain http to a host other than localhost has no clipboard API: copy the selection.
      field.focus();
      field.select();
      try {
        copied = document.execCommand("copy");
      } catch (error) {
        copied = false;
      }
    }
    if (status) {
      status.textContent = copied
        ? "Copied to the clipboard."
        : "Could not copy: the token is selected, press Ctrl+C (⌘C on a Mac).";
    }
  });
}
