/** What receiving servers send back about mail Mailroom sent, as tests send it to a bounce address. */

/**
 * A provider's feedback report (ARF, RFC 5965) about the email `emailId`: a recipient marked it as spam
 * (`abuse`). Most providers leave the recipient out (`recipient` undefined).
 */
export const feedbackReport = (emailId: string, feedbackType: string, recipient?: string) =>
  [
    "From: Feedback Loop <fbl@feedback.partner.test>",
    `To: bounces+${emailId}@agents.localhost`,
    "Subject: Email feedback report",
    "MIME-Version: 1.0",
    "Content-Type: multipart/report; report-type=feedback-report; boundary=b2",
    "",
    "--b2",
    "Content-Type: text/plain",
    "",
    "This is an email abuse report for a message received from your domain.",
    "--b2",
    "Content-Type: message/feedback-report",
    "",
    `Feedback-Type: ${feedbackType}`,
    "User-Agent: PartnerFBL/1.0",
    "Version: 1",
    "Reporting-MTA: dns; feedback.partner.test",
    ...(recipient === undefined ? [] : [`Original-Rcpt-To: <${recipient}>`]),
    "--b2",
    "Content-Type: text/rfc822-headers",
    "",
    `Message-ID: <${emailId}@agents.localhost>`,
    "--b2--",
    ""
  ].join("\r\n")
