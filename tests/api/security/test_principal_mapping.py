"""Certificate principals: the subject DN as Java writes it, and Kafka's mapping rules."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.security.errors import SecurityConfigError
from api.security.principal import NoMatchingRule, PrincipalMapper, parse_rules, subject_dn

Subject = tuple[tuple[tuple[str, str], ...], ...]


def subject(*pairs: tuple[str, str]) -> Subject:
    """A `getpeercert()` subject with one attribute per RDN, most significant first."""
    return tuple(((name, value),) for name, value in pairs)


# ------------------------------------------------------------------------------ the DN


def test_dn_is_reversed_with_rfc2253_keywords() -> None:
    cert = subject(
        ("countryName", "US"),
        ("stateOrProvinceName", "CA"),
        ("localityName", "Palo Alto"),
        ("organizationName", "Sun Microsystems"),
        ("organizationalUnitName", "JavaSoft"),
        ("commonName", "Duke"),
    )
    assert subject_dn(cert) == "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US"


def test_street_dc_and_uid_are_keywords_too() -> None:
    cert = subject(
        ("domainComponent", "com"),
        ("domainComponent", "example"),
        ("streetAddress", "1 Main St"),
        ("userId", "jdoe"),
    )
    assert subject_dn(cert) == "UID=jdoe,STREET=1 Main St,DC=example,DC=com"


def test_other_attributes_are_oid_and_der_hex_as_java_writes_them() -> None:
    # Java: new X500Principal("CN=x, EMAILADDRESS=a@b.c").getName()
    #   == "CN=x,1.2.840.113549.1.9.1=#16056140622e63" (an IA5String)
    cert = subject(("emailAddress", "a@b.c"), ("commonName", "x"))
    assert subject_dn(cert) == "CN=x,1.2.840.113549.1.9.1=#16056140622e63"
    # A serial number is a PrintableString (0x13); others are UTF8String (0x0c).
    assert subject_dn(subject(("serialNumber", "42"))) == "2.5.4.5=#13023432"
    assert subject_dn(subject(("givenName", "Ann"))) == "2.5.4.42=#0c03416e6e"
    assert subject_dn(subject(("2.5.4.99", "z"))) == "2.5.4.99=#0c017a"


def test_long_values_use_der_long_form_lengths() -> None:
    value = "x" * 200
    assert subject_dn(subject(("title", value))) == "2.5.4.12=#0c81c8" + value.encode().hex()


def test_multi_valued_rdn_is_joined_with_plus() -> None:
    cert = (
        (("organizationName", "Acme"),),
        (("commonName", "a"), ("userId", "b")),
    )
    assert subject_dn(cert) == "CN=a+UID=b,O=Acme"


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("Tkac, Adam", "Tkac\\, Adam"),
        ('a+b"c\\d<e>f;g', 'a\\+b\\"c\\\\d\\<e\\>f\\;g'),
        ("a=b", "a\\=b"),
        ("#hash", "\\#hash"),
        ("in#side", "in\\#side"),
        (" lead", "\\ lead"),
        ("trail ", "trail\\ "),
        ("  both  ", "\\ \\ both\\ \\ "),
        ("   ", "\\ \\ \\ "),
        ("mid dle", "mid dle"),
        ("ünïcödé", "ünïcödé"),
        ("", ""),
    ],
)
def test_values_are_escaped_as_java_does(value: str, written: str) -> None:
    assert subject_dn(subject(("commonName", value))) == f"CN={written}"


def test_unknown_attribute_name_is_a_clear_error() -> None:
    from api.security.errors import SecurityError

    with pytest.raises(SecurityError, match="unknown type 'noSuchAttribute'"):
        subject_dn(subject(("noSuchAttribute", "x")))


def test_empty_subject_is_an_empty_dn() -> None:
    assert subject_dn(()) == ""


# ------------------------------------------------------------------------------ the rules

# Kafka's documentation ("Customizing SSL User Name") and SslPrincipalMapperTest.
KAFKA_DOC_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


def test_kafka_documented_example() -> None:
    mapper = PrincipalMapper(KAFKA_DOC_RULES)
    dn = "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
    assert mapper.name(dn) == "serviceuser"
    dn = "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
    assert mapper.name(dn) == "adminuser@admin"


def test_kafka_documented_example_written_over_several_lines() -> None:
    # As in a server.properties with continuation lines, after the properties parser.
    rules = KAFKA_DOC_RULES.replace(",RULE", ",\n    RULE").replace(",DEFAULT", ",\n  DEFAULT")
    assert PrincipalMapper(rules).name("CN=a,OU=ServiceUsers") == "a"


def test_kafka_mapper_test_cases() -> None:
    mapper = PrincipalMapper(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    dn = "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert mapper.name(dn) == dn


def test_escaped_comma_in_a_cn() -> None:
    mapper = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_principal_of_a_certificate_subject() -> None:
    cert = subject(("organizationalUnitName", "ServiceUsers"), ("commonName", "svc"))
    assert PrincipalMapper(KAFKA_DOC_RULES).principal(cert) == "User:svc"
    assert PrincipalMapper().principal(cert) == "User:CN=svc,OU=ServiceUsers"


@pytest.mark.parametrize(
    ("rules", "texts"),
    [
        ("", ["DEFAULT"]),
        (",   , , ,      , , ,   ", ["DEFAULT"]),
        ("DEFAULT", ["DEFAULT"]),
        ("RULE://", ["RULE://"]),
        ("RULE:/.*/", ["RULE:/.*/"]),
        ("RULE:/.*/L", ["RULE:/.*/L"]),
        ("  RULE:// ,  DEFAULT  ", ["RULE://", "DEFAULT"]),
        ("  RULE:   /     / ,  DEFAULT  ", ["RULE:   /     /", "DEFAULT"]),
        ("  RULE:  /     /U   ,DEFAULT  ", ["RULE:  /     /U", "DEFAULT"]),
        (",,RULE://,,,DEFAULT,,", ["RULE://", "DEFAULT"]),
        ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", ["RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"]),
        ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", ["RULE:\\**\\/+/*/L", "RULE:\\/*\\**/**/"]),
        (
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,"
            "RULE:, DEFAULT, /DEFAULT/,DEFAULT",
            [
                "RULE:,RULE:,/,RULE:,\\//U",
                "RULE:,/RULE:,/",
                "RULE:,RULE:,/L,RULE:,/L",
                "RULE:, DEFAULT, /DEFAULT/",
                "DEFAULT",
            ],
        ),
    ],
)
def test_rules_split_as_kafka_splits_them(rules: str, texts: list[str]) -> None:
    assert [rule.text for rule in parse_rules(rules)] == texts


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        "RULE:(unclosed/$1/",
        "RULE:(.*)/$x/",
        "RULE:(.*)/${nope}/",
        "RULE:(.*)/trailing\\",
        "DEFAULT DEFAULT",
        "RULE:a/b/ x",
    ],
)
def test_invalid_rules_are_clear_errors(rules: str) -> None:
    with pytest.raises(
        SecurityConfigError, match=r"ssl\.principal\.mapping\.rules is invalid"
    ) as e:
        PrincipalMapper(rules)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("rule", "dn", "name"),
    [
        # A reference to a missing group is literal text, as Kafka makes it.
        ("RULE:^CN=(.*?),OU=(.*?)$/$1@$4/", "CN=a,OU=b", "a@$4"),
        # $12 with two groups is group 1 then "2".
        ("RULE:^CN=(.*?),OU=(.*?)$/$12/", "CN=a,OU=b", "a2"),
        ("RULE:^CN=(.*?),OU=(.*?)$/$0/", "CN=a,OU=b", "CN=a,OU=b"),
        ("RULE:^CN=(?<user>.*?),.*$/${user}/U", "CN=bob,O=x", "BOB"),
        ("RULE:^CN=(.*?)(,.*)?$/$1$2/", "CN=solo", "solo"),
        ("RULE:^CN=(.*?),.*$/\\$1 \\/ $1/", "CN=x,O=y", "$1 / x"),
        ("RULE:^CN=([^\\/]+)\\/x$/$1/", "CN=a/x", "a"),
        ("RULE:.*/X/", "anything", "XX"),  # Java's replaceAll also replaces the empty end
    ],
)
def test_replacements_follow_java(rule: str, dn: str, name: str) -> None:
    assert PrincipalMapper(rule).name(dn) == name


def test_pattern_must_match_the_whole_dn() -> None:
    mapper = PrincipalMapper("RULE:CN=(\\w+)/$1/")
    assert mapper.name("CN=abc") == "abc"
    with pytest.raises(NoMatchingRule, match=r"no ssl\.principal\.mapping\.rules rule applies"):
        mapper.name("CN=abc,O=x")


def test_first_matching_rule_wins() -> None:
    mapper = PrincipalMapper("RULE:^CN=(.*)$/first-$1/,RULE:^CN=(.*)$/second-$1/")
    assert mapper.name("CN=x") == "first-x"


def test_no_matching_rule_names_the_dn_and_rules() -> None:
    with pytest.raises(NoMatchingRule) as failure:
        PrincipalMapper("RULE:^CN=admin$/admin/").name("CN=mallory")
    assert "CN=mallory" in str(failure.value) and "RULE:^CN=admin$/admin/" in str(failure.value)


@given(st.text())
def test_default_returns_the_dn_unchanged(dn: str) -> None:
    assert PrincipalMapper("DEFAULT").name(dn) == dn


@given(st.text(max_size=60))
def test_rule_parser_never_crashes_on_garbage(rules: str) -> None:
    with contextlib.suppress(SecurityConfigError):
        parse_rules(rules)
