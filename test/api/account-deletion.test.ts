/**
 * `DELETE /api/auth/account` over real HTTP and SMTP against a started server: what a person deleting
 * their account meets (the password asked again, its refusals), and what is true afterwards: the
 * account's key, token and cookie stop working, its mailbox takes no more mail, its address stays
 * held from other accounts, its email may register again. Which rows, vectors and keys go is
 * test/domain/account-closure.test.ts's subject.
 */
import { describe, expect, it } from "vitest"
import { signUp, withApiKey } from "../support/accounts.ts"
import { DOMAIN, newBox } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { anonymous, offContract, sessionFrom, withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer

useSuiteServer((s) => {
  suite = s
})

const deleteAccount = (user: { accessToken: string }, body: unknown) =>
  withToken(suite.url, user).DELETE("/api/auth/account", { body: offContract(body) })

describe("DELETE /api/auth/account", () => {
  it("asks for the password: none, an empty one and a wrong one are 400 on details.password, and the account stays", async () => {
    const user = await withApiKey(suite.url)
    for (const [body, reason] of [[{}, "is required"], [{ password: "" }, "is required"], [{ password: "not it at all" }, "is not the account's password"]] as const) {
      const refused = await deleteAccount(user, body)
      expect(refused.response.status).toBe(400)
      expect(refused.error).toEqual({
        success: false,
        error: { code: "VALIDATION_ERROR", message: expect.any(String), details: { password: reason } }
      })
    }
    const still = await withKey(suite.url, user).GET("/v1/api/mailboxes")
    expect(still.response.status).toBe(200)
  })

  it("is for a login session: an API key is 401, and nothing is deleted", async () => {
    const user = await withApiKey(suite.url)
    const refused = await withKey(suite.url, user).DELETE("/api/auth/account", { body: { password: user.password } })
    expect(refused.response.status).toBe(401)
    expect(refused.error?.error.code).toBe("UNAUTHORIZED")
    expect((await withKey(suite.url, user).GET("/v1/api/mailboxes")).response.status).toBe(200)
  })

  it("deletes the account: its key, token and cookie stop working, its mailbox takes no mail, its address is held, its email is free", async () => {
    const user = await withApiKey(suite.url)
    const box = await newBox(suite.url, { user })
    await sendMail(suite.server.smtpPort, { to: box.address, subject: "Before the end", text: "Hello" })
    await until("the email listed", async () => {
      const { data } = await withKey(suite.url, user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data && data.data.length === 1 ? true : undefined
    }, 30_000, 100, 500)

    const deleted = await deleteAccount(user, { password: user.password })
    expect(deleted.response.status).toBe(200)
    expect(deleted.data).toEqual({ success: true, data: { deleted: true, email: user.email, mailboxes: 1, emails: 1 } })
    // The dashboard's cookie is cleared with the answer.
    expect(deleted.response.headers.get("set-cookie")).toMatch(/^mailroom_session=;.*Max-Age=0/)

    const key = await withKey(suite.url, user).GET("/v1/api/mailboxes")
    expect(key.response.status).toBe(401)
    expect((await withToken(suite.url, user).GET("/api/auth/sessions")).response.status).toBe(401)
    const origin = `http://localhost:${suite.server.port}`
    const cookie = await fetch(`${suite.url}/api/mailboxes`, { headers: sessionFrom(user, origin).headers })
    expect(cookie.status).toBe(401)
    const login = await anonymous(suite.url).POST("/api/auth/login", { body: { email: user.email, password: user.password } })
    expect(login.response.status).toBe(401)

    // Its address takes no more mail, and no other account may take it for 30 days.
    const smtp = await connectSmtp(suite.server.smtpPort)
    try {
      const { replies } = await envelope(smtp, "someone@example.test", [box.address])
      expect(replies[0]!.code).toBe(550)
    } finally {
      await smtp.close()
    }
    const other = await withApiKey(suite.url)
    const taken = await withKey(suite.url, other).POST("/v1/api/mailboxes", {
      body: { local_part: box.address.split("@")[0]!, domain: DOMAIN }
    })
    expect(taken.response.status).toBe(409)
    expect(taken.error?.error.code).toBe("EMAIL_TAKEN")

    // The person may sign up again with the same email: a new, empty account.
    const again = await signUp(suite.url, { email: user.email })
    expect(again.userId).not.toBe(user.userId)
    const mailboxes = await withToken(suite.url, again).GET("/api/mailboxes")
    expect(mailboxes.data?.mailboxes).toEqual([])
  })

  it("a second deletion from another of its sessions finds the account gone: 401", async () => {
    const user = await signUp(suite.url)
    const second = await anonymous(suite.url).POST("/api/auth/login", { body: { email: user.email, password: user.password } })
    expect((await deleteAccount(user, { password: user.password })).response.status).toBe(200)
    const late = await deleteAccount({ accessToken: second.data!.data.accessToken }, { password: user.password })
    expect(late.response.status).toBe(401)
    expect(late.error?.error.code).toBe("UNAUTHORIZED")
  })

})
