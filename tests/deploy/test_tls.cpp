// HTTPS trust against `nymph-control serve --tls-cert/--tls-key` with a private CA made by openssl: trusted
// through [server] ca_file and through SSL_CERT_FILE, rejected with a clear error when the CA is not trusted
// and when the certificate names another host. Checked through `nymph doctor` (control.tls), with the dev
// binary and with the static one (whose OpenSSL was built for Debian's paths).
#include <gtest/gtest.h>

#include "tests/deploy/deploy_support.hpp"

using namespace nymph::test;
using namespace nymph::test::deploy;
namespace json = boost::json;

namespace {

struct Outcome {
  std::string verdict, detail;
  int exit_code = -1;
  std::string raw;
};

class Tls : public ::testing::TestWithParam<bool> {  // param: use the static binary
 protected:
  void SetUp() override { ca_ = make_test_ca(dir_.path()); }

  std::string binary() const { return GetParam() ? static_nymph() : std::string(NYMPH_BINARY); }

  // Runs doctor against `cp` with ca_file (optional) and extra environment; returns control.tls.
  Outcome check(const ControlServer& cp, std::optional<fs::path> ca_file, std::map<std::string, std::string> env = {}) {
    write_file(dir_ / "token", cp.agent_token() + "\n", fs::perms(0600));
    std::string toml = "[server]\nurl = \"" + cp.url() + "\"\ntoken_file = \"" + (dir_ / "token").string() + "\"\n";
    if (ca_file) toml += "ca_file = \"" + ca_file->string() + "\"\n";
    toml += "[runners.slurm]\nenabled = false\n";
    write_file(dir_ / "config.toml", toml);
    env.emplace("HOME", dir_.path().string());
    env.emplace("PATH", "/usr/bin:/bin");
    auto r = run_with_env(env, {binary(), "doctor", "--json", "--timeout", "10", "--config", (dir_ / "config.toml").string()});
    Outcome o{"(missing)", "", r.exit_code, r.out + r.err};
    auto report = one_object(r.out);
    for (const auto& c : report.at("checks").as_array())
      if (c.as_object().at("name") == "control.tls") {
        o.verdict = c.as_object().at("verdict").as_string();
        o.detail = c.as_object().at("detail").as_string();
      }
    return o;
  }

  ControlServerOptions serve_with(const fs::path& cert, const fs::path& key) {
    ControlServerOptions o;
    o.extra_args = {"--tls-cert", cert.string(), "--tls-key", key.string()};
    return o;
  }

  TempDir dir_;
  TestCa ca_;
};

}  // namespace

TEST_P(Tls, TrustedThroughCaFile) {
  ControlServer cp(serve_with(ca_.cert_pem, ca_.key_pem));
  ASSERT_EQ(cp.url().rfind("https://127.0.0.1:", 0), 0u) << cp.url();
  auto o = check(cp, ca_.ca_pem);
  EXPECT_EQ(o.verdict, "ok") << o.raw;
  EXPECT_NE(o.detail.find("ca_file"), std::string::npos) << o.detail;
}

TEST_P(Tls, TrustedThroughSslCertFile) {
  ControlServer cp(serve_with(ca_.cert_pem, ca_.key_pem));
  auto o = check(cp, std::nullopt, {{"SSL_CERT_FILE", ca_.ca_pem.string()}});
  EXPECT_EQ(o.verdict, "ok") << o.raw;
  EXPECT_NE(o.detail.find("SSL_CERT_FILE="), std::string::npos) << o.detail;
}

TEST_P(Tls, UntrustedCaIsRejectedClearly) {
  ControlServer cp(serve_with(ca_.cert_pem, ca_.key_pem));
  auto o = check(cp, std::nullopt);
  EXPECT_EQ(o.exit_code, 1) << o.raw;
  EXPECT_EQ(o.verdict, "fail") << o.raw;
  EXPECT_NE(o.detail.find("TLS handshake with " + cp.url() + " failed"), std::string::npos) << o.detail;
  EXPECT_NE(o.detail.find("unable to get local issuer certificate"), std::string::npos) << o.detail;
}

TEST_P(Tls, WrongHostNameIsRejectedClearly) {
  ControlServer cp(serve_with(ca_.other_cert_pem, ca_.other_key_pem));
  auto o = check(cp, ca_.ca_pem);  // the CA is trusted; the name is not 127.0.0.1
  EXPECT_EQ(o.exit_code, 1) << o.raw;
  EXPECT_EQ(o.verdict, "fail") << o.raw;
  EXPECT_NE(o.detail.find("TLS handshake with " + cp.url() + " failed"), std::string::npos) << o.detail;
  EXPECT_NE(o.detail.find("mismatch"), std::string::npos) << o.detail;
}

INSTANTIATE_TEST_SUITE_P(Binaries, Tls, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "static" : "dev"; });
