"""Canonical argument values (DESIGN.md "Scoring semantics: canonical argument values")."""

from __future__ import annotations

import pytest

from tooleval.canonical import MISSING, canonical_json, canonical_value, diff_paths, parse_arguments


class TestParseArguments:
    @pytest.mark.parametrize("text", ["", "   ", "\n\t", "null", " null "])
    def test_empty_or_null_text_is_empty_args(self, text):
        assert parse_arguments(text) == ({}, None)

    def test_none_is_empty_args(self):
        assert parse_arguments(None) == ({}, None)

    def test_object_text(self):
        assert parse_arguments('{"order_id": "A-1", "amount": 250.0}') == ({"order_id": "A-1", "amount": 250}, None)

    @pytest.mark.parametrize(
        ("text", "kind"),
        [("[1, 2]", "list"), ('"s"', "str"), ("3", "int"), ("2.5", "float"), ("true", "bool")],
    )
    def test_non_object_json_is_malformed(self, text, kind):
        assert parse_arguments(text) == (None, f"not a JSON object: {kind}")

    @pytest.mark.parametrize("text", ['{"id": "A-1"', '{"id": ', "{", "{'id': 'A-1'}", '{"a": 1}{}', "undefined"])
    def test_unparsable_text_is_malformed(self, text):
        args, error = parse_arguments(text)
        assert args is None
        assert error.startswith("invalid JSON")

    @pytest.mark.parametrize(
        "text", ["NaN", "Infinity", "-Infinity", '{"x": NaN}', '{"x": -Infinity}', "1e400", '{"x": 1e400}', '{"x": [-1e999]}']
    )
    def test_non_finite_numbers_are_malformed(self, text):
        args, error = parse_arguments(text)
        assert args is None
        assert error is not None
        # never silently turned into {} or into a float('inf')
        assert "not a JSON object" not in error

    def test_dict_input_is_accepted_and_canonicalised(self):
        assert parse_arguments({"b": 2.0, "a": {"c": [1.0, "x"]}}) == ({"b": 2, "a": {"c": [1, "x"]}}, None)

    def test_dict_input_with_nan_is_malformed(self):
        args, error = parse_arguments({"x": float("nan")})
        assert args is None
        assert "nan" in error

    def test_other_types_are_malformed(self):
        args, error = parse_arguments(5)
        assert args is None
        assert "int" in error

    def test_floats_that_are_not_integral_stay_floats(self):
        args, _ = parse_arguments('{"x": 2.5, "y": 1e2}')
        # 1e2 is 100.0 -> 100 (an int); 2.5 stays a float
        assert args == {"x": 2.5, "y": 100}
        assert type(args["x"]) is float
        assert type(args["y"]) is int

    def test_booleans_stay_booleans(self):
        args, _ = parse_arguments('{"on": true, "off": false}')
        assert args["on"] is True
        assert args["off"] is False


class TestCanonicalJson:
    def test_key_order_is_irrelevant(self):
        assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1}) == '{"a":2,"b":1}'

    def test_nested_key_order_is_irrelevant(self):
        left = {"trip": {"from": "CityA", "to": "CityB"}, "pax": [{"last": "L", "first": "F"}]}
        right = {"pax": [{"first": "F", "last": "L"}], "trip": {"to": "CityB", "from": "CityA"}}
        assert canonical_json(left) == canonical_json(right)
        assert canonical_json(left) == '{"pax":[{"first":"F","last":"L"}],"trip":{"from":"CityA","to":"CityB"}}'

    def test_integral_float_equals_int(self):
        assert canonical_json({"amount": 250.0}) == canonical_json({"amount": 250}) == '{"amount":250}'

    def test_non_integral_float_differs_from_int(self):
        assert canonical_json({"amount": 250.5}) != canonical_json({"amount": 250})

    def test_true_is_not_one(self):
        assert canonical_json({"on": True}) != canonical_json({"on": 1})
        assert canonical_json({"on": True}) == '{"on":true}'

    def test_false_is_not_zero(self):
        assert canonical_json({"on": False}) != canonical_json({"on": 0})

    def test_string_ten_is_not_number_ten(self):
        assert canonical_json({"n": "10"}) != canonical_json({"n": 10})

    def test_negative_zero_is_zero(self):
        assert canonical_json({"x": -0.0}) == canonical_json({"x": 0}) == '{"x":0}'

    def test_list_order_matters(self):
        assert canonical_json({"ids": ["i1", "i2"]}) != canonical_json({"ids": ["i2", "i1"]})

    def test_null_differs_from_absent(self):
        assert canonical_json({"q": "x", "status": None}) != canonical_json({"q": "x"})

    def test_strings_compare_exactly(self):
        assert canonical_json({"s": "abc"}) != canonical_json({"s": "ABC"})
        assert canonical_json({"s": "abc"}) != canonical_json({"s": "abc "})

    def test_non_ascii_kept(self):
        assert canonical_json({"city": "Zürich"}) == '{"city":"Zürich"}'

    def test_tuple_is_a_list(self):
        assert canonical_value((1, 2.0)) == [1, 2]

    @pytest.mark.parametrize("value", [float("nan"), float("inf"), {1, 2}, b"x", object()])
    def test_values_json_cannot_hold_are_refused(self, value):
        with pytest.raises(ValueError):
            canonical_json({"x": value})


class TestDiffPaths:
    def test_equal_values_have_no_paths(self):
        assert diff_paths({"a": 1, "b": [1, {"c": 2}]}, {"b": [1.0, {"c": 2.0}], "a": 1}) == []

    def test_top_level_key(self):
        assert diff_paths({"amount_cents": 9800, "order_id": "A"}, {"amount_cents": 8900, "order_id": "A"}) == [
            "amount_cents"
        ]

    def test_nested_path_in_list(self):
        expected = {"flights": [{"date": "2024-05-01", "no": "HAT1"}, {"date": "2024-05-03", "no": "HAT2"}]}
        observed = {"flights": [{"date": "2024-05-02", "no": "HAT1"}, {"date": "2024-05-03", "no": "HAT9"}]}
        assert diff_paths(expected, observed) == ["flights[0].date", "flights[1].no"]

    def test_absent_differs_from_null(self):
        assert diff_paths({"q": "x"}, {"q": "x", "status": None}) == ["status"]
        assert diff_paths({"q": "x", "status": None}, {"q": "x"}) == ["status"]

    def test_absent_nested_object(self):
        assert diff_paths({"trip": {"from": "A"}}, {}) == ["trip"]

    def test_list_length_difference(self):
        assert diff_paths({"ids": [1, 2, 3]}, {"ids": [1]}) == ["ids[1]", "ids[2]"]
        assert diff_paths({"ids": []}, {"ids": [{"a": 1}]}) == ["ids[0]"]

    def test_list_order(self):
        assert diff_paths({"item_ids": ["i1", "i2"]}, {"item_ids": ["i2", "i1"]}) == ["item_ids[0]", "item_ids[1]"]

    def test_type_change_dict_vs_list(self):
        assert diff_paths({"a": {}}, {"a": []}) == ["a"]
        assert diff_paths({"a": {"x": 1}}, {"a": ["x"]}) == ["a"]

    def test_type_change_container_vs_scalar(self):
        assert diff_paths({"a": {"x": 1}}, {"a": "x"}) == ["a"]
        assert diff_paths({"a": [1]}, {"a": 1}) == ["a"]

    def test_scalar_type_rules(self):
        assert diff_paths({"n": 10}, {"n": 10.0}) == []
        assert diff_paths({"n": 10}, {"n": "10"}) == ["n"]
        assert diff_paths({"on": 1}, {"on": True}) == ["on"]
        assert diff_paths({"on": False}, {"on": 0}) == ["on"]
        assert diff_paths({"x": None}, {"x": 0}) == ["x"]

    def test_non_identifier_key_is_quoted(self):
        assert diff_paths({"a.b": 1}, {"a.b": 2}) == ['["a.b"]']
        assert diff_paths({"x": {"a b": 1}}, {"x": {"a b": 2}}) == ['x["a b"]']

    def test_numeric_key_is_not_a_list_index(self):
        # a key "0" is quoted so it cannot be read as position 0 of a list
        assert diff_paths({"m": {"0": 1}}, {"m": {"0": 2}}) == ['m["0"]']
        assert diff_paths({"m": [1]}, {"m": [2]}) == ["m[0]"]

    def test_paths_in_key_order(self):
        assert diff_paths({"b": 1, "a": 1, "c": 1}, {"c": 2, "b": 2, "a": 2}) == ["a", "b", "c"]

    def test_missing_marker_is_not_null(self):
        assert MISSING is not None
        assert diff_paths(MISSING, None, "k") == ["k"]
        assert diff_paths(MISSING, MISSING, "k") == []
