/** Mail to a test server as a well-behaved client sends it: one nodemailer transaction, then closed. */
import nodemailer from "nodemailer"
import type Mail from "nodemailer/lib/mailer"
import { fresh } from "./mailboxes.ts"

export const sendMail = async (smtpPort: number, message: Mail.Options) => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: smtpPort, secure: false, ignoreTLS: true })
  try {
    return await transport.sendMail({ from: "sender@example.com", messageId: `<${fresh("msg")}@example.com>`, ...message })
  } finally {
    transport.close()
  }
}
