// The top bar's "Staff" menu (a <details>): it closes when you click elsewhere or press Escape,
// as menus do. Without JavaScript it still opens and closes on its own summary.
document.addEventListener("click", (event) => {
  for (const menu of document.querySelectorAll("details.menu[open]")) {
    if (!menu.contains(event.target)) menu.removeAttribute("open");
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  for (const menu of document.querySelectorAll("details.menu[open]")) {
    menu.removeAttribute("open");
    menu.querySelector("summary").focus();
  }
});
