/**
 * Reading a delivery report that came to a bounce address (services/outbound/bounces.ts): the failed
 * recipients and the diagnostic stored as the delivery's last_response and the suppression's.
 */
import { describe, expect, it } from "vitest"
import { deliveryStatusOf, failedRecipients } from "../../services/outbound/bounces.ts"

/** A report of `type` whose status part (with `headers`) carries `body`, as the bytes arrive: a binary string. */
const report = (type: string, headers: string, body: Buffer) =>
  Buffer.concat([
    Buffer.from(
      "From: MAILER-DAEMON@mx.example.de\r\nTo: bounces+eml_0123456789abcdef01234567-t@agents.localhost\r\nSubject: Undelivered Mail\r\n" +
        `MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=${type}; boundary=R\r\n\r\n` +
        "--R\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nYour message could not be delivered.\r\n" +
        `--R\r\n${headers}\r\n\r\n`
    ),
    body,
    Buffer.from("\r\n--R--\r\n")
  ]).toString("latin1")

const status = "Reporting-MTA: dns; mx.example.de\r\n\r\nFinal-Recipient: rfc822; jörg@example.de\r\nAction: failed\r\nStatus: 5.1.1\r\n" +
  "Diagnostic-Code: smtp; 550 5.1.1 Empfänger unbekannt"

describe("delivery reports", () => {
  it("an RFC 6533 global delivery status is UTF-8, sent 8-bit, base64 or quoted-printable", () => {
    const utf8 = Buffer.from(status, "utf8")
    const expected = [{ recipient: "jörg@example.de", response: "550 5.1.1 Empfänger unbekannt" }]
    const type = "Content-Type: message/global-delivery-status"
    expect(failedRecipients(deliveryStatusOf(report("global-delivery-status", type, utf8))!)).toEqual(expected)
    const base64 = Buffer.from(utf8.toString("base64").replace(/(.{76})/g, "$1\r\n"))
    expect(failedRecipients(deliveryStatusOf(report("global-delivery-status", `Content-Transfer-Encoding: base64\r\n${type}`, base64))!)).toEqual(expected)
    const quoted = Buffer.from(status.replace("ö", "=C3=B6").replace("ä", "=C3=A4"))
    expect(failedRecipients(deliveryStatusOf(report("global-delivery-status", `${type}\r\nContent-Transfer-Encoding: quoted-printable`, quoted))!)).toEqual(expected)
  })

  it("a plain delivery status is read as it is; stray 8-bit bytes that are no UTF-8 as Windows-1252", () => {
    const plain = "Reporting-MTA: dns; mx.example.com\r\n\r\nFinal-Recipient: rfc822; ann@example.com\r\nAction: failed\r\nStatus: 5.1.1\r\n"
    expect(failedRecipients(deliveryStatusOf(report("delivery-status", "Content-Type: message/delivery-status", Buffer.from(plain)))!)).toEqual([
      { recipient: "ann@example.com", response: "Bounce report: status 5.1.1" }
    ])
    const latin = Buffer.concat([Buffer.from(plain), Buffer.from("Diagnostic-Code: smtp; 552 Empf"), Buffer.from([0xe4]), Buffer.from("nger: Postfach "), Buffer.from([0x84, 0x76, 0x6f, 0x6c, 0x6c, 0x93])])
    expect(failedRecipients(deliveryStatusOf(report("delivery-status", "Content-Type: message/delivery-status", latin))!)[0]?.response).toBe(
      "552 Empfänger: Postfach „voll“"
    )
  })
})
