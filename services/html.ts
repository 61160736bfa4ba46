/** Text as it must stand inside HTML, in an element or a quoted attribute: `&`, `<`, `>`, `"` and `'` escaped. */
export const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)
