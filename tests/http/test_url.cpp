// The control-plane URL rule (http/url.hpp): parsed with Boost.URL, never by string prefixes.
#include <gtest/gtest.h>

#include <string>

#include "http/url.hpp"

namespace h = nymph::http;

namespace {

std::string error_of(std::string_view url) {
  auto ep = h::parse_server_url(url);
  return ep ? std::string() : ep.error().message;
}

}  // namespace

TEST(ServerUrl, AcceptsHttpsAnywhereAndPlainHttpToLoopbackOnly) {
  struct Case {
    const char* url;
    const char* host;
    unsigned port;
    bool tls;
  };
  for (const auto& c : {Case{"http://127.0.0.1:8470", "127.0.0.1", 8470, false},
                        Case{"http://127.1.2.3:1", "127.1.2.3", 1, false},
                        Case{"http://[::1]:8470", "::1", 8470, false},
                        Case{"http://localhost:8470", "localhost", 8470, false},
                        Case{"https://anything.example:443", "anything.example", 443, true},
                        Case{"https://h", "h", 443, true},
                        Case{"http://127.0.0.1", "127.0.0.1", 80, false},
                        Case{"https://10.0.0.5:65535/prefix/", "10.0.0.5", 65535, true}}) {
    auto ep = h::parse_server_url(c.url);
    ASSERT_TRUE(ep) << c.url << ": " << ep.error().message;
    EXPECT_EQ(ep->host, c.host) << c.url;
    EXPECT_EQ(ep->port, c.port) << c.url;
    EXPECT_EQ(ep->tls, c.tls) << c.url;
  }
  EXPECT_EQ(h::parse_server_url("https://10.0.0.5:65535/prefix/")->base_path, "/prefix");
}

TEST(ServerUrl, RefusesEachBadUrlNamingIt) {
  struct Case {
    const char* url;
    const char* why;
  };
  for (const auto& c : {Case{"http://127.attacker.example:8470", "only allowed to a loopback address"},
                        Case{"http://127.0.0.1.example.com:8470", "not followed by ':port' or '/'"},
                        Case{"http://10.0.0.5:8470", "only allowed to a loopback address"},
                        Case{"http://[::ffff:127.0.0.1]:8470", "only allowed to a loopback address"},
                        Case{"http://0x7f.0.0.1:8470", "only allowed to a loopback address"},
                        Case{"http://localhost.example:8470", "only allowed to a loopback address"},
                        Case{"http://host:99999", "between 1 and 65535"},
                        Case{"https://host:165535", "between 1 and 65535"},
                        Case{"http://host:0", "between 1 and 65535"},
                        Case{"https://host:", "between 1 and 65535"},
                        Case{"ftp://x", "scheme must be https://"},
                        Case{"https://user:pw@cp.example.org", "credentials"},
                        Case{"http://127.0.0.1:8470/#frag", "fragment"},
                        Case{"https://cp.example.org/?a=b", "query"},
                        Case{"cp.example.org", "invalid URL"},
                        Case{"https://", "invalid URL"}}) {
    auto message = error_of(c.url);
    EXPECT_NE(message.find(c.why), std::string::npos) << c.url << ": " << message;
    EXPECT_NE(message.find(c.url), std::string::npos) << c.url << ": " << message;
  }
}

TEST(ServerUrl, PlainHttpAnywhereIsAnExplicitChoiceThatStillParses) {
  auto ep = h::parse_server_url("http://10.0.0.5:8470", h::PlainHttp::anywhere);
  ASSERT_TRUE(ep) << ep.error().message;
  EXPECT_FALSE(ep->loopback);
  EXPECT_FALSE(h::parse_server_url("http://127.0.0.1.example.com:8470", h::PlainHttp::anywhere));
  EXPECT_FALSE(h::parse_server_url("http://host:99999", h::PlainHttp::anywhere));
}

TEST(ServerUrl, AMessageNeverCarriesAControlCharacter) {
  auto message = error_of("http://10.0.0.5\r\nX-Injected: yes");
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("\\r\\n"), std::string::npos) << message;
}

TEST(Endpoint, LoopbackIsDecidedOnTheParsedHost) {
  EXPECT_TRUE(h::parse_endpoint("https://127.0.0.1")->loopback);
  EXPECT_TRUE(h::parse_endpoint("https://[::1]")->loopback);
  EXPECT_TRUE(h::parse_endpoint("https://localhost")->loopback);
  EXPECT_FALSE(h::parse_endpoint("https://127.attacker.example")->loopback);
  EXPECT_FALSE(h::parse_endpoint("https://127.1")->loopback);
}

// Found by fuzz/text_values: "https://cp.CC%CCCC.../" was accepted with the host decoded to a lone byte 0xCC,
// which no resolver or certificate has and which re-renders to a URL that does not parse.
TEST(ServerUrl, PercentEncodedHostNamesAreRefused) {
  auto r = nymph::http::parse_endpoint("https://cp.CC%CCCC.example.org/");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("percent-encoded"), std::string::npos) << r.error().message;
  EXPECT_FALSE(nymph::http::parse_endpoint("https://c%70.example.org"));
  EXPECT_TRUE(nymph::http::parse_endpoint("https://cp.example.org/a%20b"));
}
