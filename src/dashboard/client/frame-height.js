/**
 * The one script a mail frame runs (mail-frame.js): it tells the dashboard how tall the email is
 * (`{ mailroomFrame: { height, viewport } }`: the document's scroll height and a sideways scrollbar's,
 * and the frame's height it was measured in), once the body is there and again whenever that can
 * change: an image arriving, the frame resized, the body's box changing. The dashboard makes the
 * frame that tall, so that the email reads with the page and not in a box of its own. The email's
 * own scripts never run: the page's policy allows this script by its hash (serve.ts) and the
 * frame's own policy by a nonce (mailDocument), and the email's scripts were removed before either.
 */
export const FRAME_SCRIPT =
  "(function(){var root=document.documentElement;" +
  "var report=function(){parent.postMessage({mailroomFrame:{height:root.scrollHeight+innerHeight-root.clientHeight,viewport:innerHeight}},\"*\")};" +
  "addEventListener(\"load\",report,true);addEventListener(\"resize\",report);" +
  "addEventListener(\"DOMContentLoaded\",function(){report();new ResizeObserver(report).observe(document.body)})})()"
