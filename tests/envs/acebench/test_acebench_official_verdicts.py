"""Frozen verdicts of ACEBench's OFFICIAL evaluator on mutated real entries; ours must match them.

Every row was produced by running the official evaluator (``eval_main.py``, reconstructed in a
throwaway folder; see benchmarks/acebench_official_runner.py) on the same output in the same run as
ours; benchmarks/acebench_official_agreement.py does this at scale (about 80,000 cases).
"""

import pytest
from conftest import needs_data

from benchmarks.acebench_mutations import agent_cases
from envs.acebench.data import load_category
from envs.acebench.scoring import verdict

pytestmark = needs_data


def _entry(language, entry_id):
    category = entry_id.rsplit("_", 1)[0]
    if category.startswith("normal_multi_turn"):
        category = category.rsplit("_", 1)[0]
    return next(e for e in load_category(language, category) if e.id == entry_id)


# (language, entry id, mutation, model output, official valid, official error_type)
NORMAL_AND_SPECIAL = [
    (
        "zh",
        "normal_similar_api_1",
        "bare_call",
        "diabetes_impact_check(health_aspects=['心血管'])",
        False,
        "wrong_output_format",
    ),
    (
        "zh",
        "normal_atom_object_deep_1",
        "binop_value",
        "[CulturalFestivalGuide_V1(userProfile=2+3, festivalDate='2023-04-10')]",
        False,
        "type_error",
    ),
    (
        "en",
        "normal_atom_bool_0",
        "bool_string:include_vegetarian_options",
        "[ProteinRichMealPlanner_generateList(meal_type='dinner', include_vegetarian_options='true', cuisine_preference='Asian')]",
        True,
        "",
    ),
    (
        "en",
        "normal_similar_api_1",
        "code_fence",
        "```python\n[carbon_action_query(related_sectors=['energy'])]\n```",
        False,
        "wrong_output_format",
    ),
    (
        "en",
        "normal_atom_object_deep_0",
        "dict_extra_key:evaluation_criteria",
        "[partner_assessment_evaluate_operational_efficiency(partner_id='TP-12345', evaluation_criteria={'metrics': ['time savings', 'cost reduction'], 'time_frame': 'Last Quarter', 'zz_extra': '1'})]",
        False,
        "value_error",
    ),
    (
        "en",
        "normal_atom_object_deep_0",
        "dict_missing_key:evaluation_criteria",
        "[partner_assessment_evaluate_operational_efficiency(partner_id='TP-12345', evaluation_criteria={'time_frame': 'Last Quarter'})]",
        False,
        "value_error",
    ),
    (
        "zh",
        "normal_atom_list_1",
        "dotted_function",
        "[api.InternetUsage_compareTrends(countries=['美国', '中国'], metrics=['互联网普及率', '政治活跃度'], timeFrame='过去五年')]",
        False,
        "function_mismatch",
    ),
    (
        "en",
        "normal_multi_turn_user_adjust_0_0",
        "double_quotes",
        '[branding_createPressRelease(title="Revolutionary New Product Launch", content="We are excited to launch our new product that will change the industry standards", author="John Doe", publishDate="2023-08-01 10:00")]',
        True,
        "",
    ),
    (
        "en",
        "normal_single_turn_parallel_function_1",
        "drop_first_call",
        "[finance_credit_scoring(applicant_details={'financial_history': [{'account_type': 'checking', 'balance': 5000}], 'recent_activities': [{'activity_date': '2021-01-01', 'activity_type': 'deposit', 'amount': 5000}]})]",
        False,
        "wrong functions number",
    ),
    (
        "en",
        "normal_single_turn_parallel_function_1",
        "drop_last_call",
        "[CommodityDataRetriever_fetchCommodityInfo(commodities=[{'name': 'gold', 'dataTypes': ['real-time', 'historical']}, {'name': 'oil', 'dataTypes': ['real-time', 'historical']}], timeFrame={'start': '2023-05-01', 'end': '2023-05-31'})]",
        False,
        "wrong functions number",
    ),
    (
        "zh",
        "normal_similar_api_0",
        "duplicate_call",
        "[brand_sustainability_jya(brand_name='Jya', areas_of_interest=['能源效率']), brand_sustainability_jya(brand_name='Jya', areas_of_interest=['能源效率'])]",
        False,
        "wrong functions number",
    ),
    ("zh", "normal_atom_list_1", "empty_list", "[]", False, "wrong functions number"),
    (
        "zh",
        "normal_atom_object_deep_1",
        "extra_param",
        "[CulturalFestivalGuide_V1(userProfile={'ageGroup': 'adult', 'interests': {'music': [], 'arts': []}}, festivalDate='2023-04-10', unexpected_arg='x')]",
        False,
        "addition_args",
    ),
    (
        "zh",
        "normal_atom_object_deep_1",
        "gt",
        "[CulturalFestivalGuide_V1(userProfile={'ageGroup': 'adult', 'interests': {'music': [], 'arts': []}}, festivalDate='2023-04-10')]",
        True,
        "",
    ),
    (
        "zh",
        "normal_atom_list_1",
        "inner_spaces",
        "[InternetUsage_compareTrends ( countries = ['美国', '中国'], metrics = ['互联网普及率', '政治活跃度'], timeFrame = '过去五年' ) ]",
        True,
        "",
    ),
    (
        "zh",
        "normal_multi_turn_user_adjust_0_1",
        "int_as_float:suspicion_level",
        "[Alert_System(entry_id='log003', suspicion_level=8.0)]",
        True,
        "",
    ),
    (
        "en",
        "normal_atom_object_deep_0",
        "kwargs_splat",
        "[partner_assessment_evaluate_operational_efficiency(**{'partner_id': 'TP-12345', 'evaluation_criteria': {'metrics': ['time savings', 'cost reduction'], 'time_frame': 'Last Quarter'}})]",
        False,
        "lack_args",
    ),
    (
        "en",
        "normal_multi_turn_user_adjust_0_1",
        "list_empty:metrics",
        "[branding_evaluateMediaEngagement(pressReleaseId='12345', metrics=[])]",
        False,
        "value_error:list_dict_count",
    ),
    (
        "zh",
        "normal_atom_list_1",
        "list_reordered:countries",
        "[InternetUsage_compareTrends(countries=['中国', '美国'], metrics=['互联网普及率', '政治活跃度'], timeFrame='过去五年')]",
        False,
        "value_error:list/tuple",
    ),
    (
        "en",
        "normal_similar_api_1",
        "missing_param:related_sectors",
        "[carbon_action_query()]",
        False,
        "wrong_param",
    ),
    (
        "zh",
        "normal_similar_api_1",
        "misspelt_function",
        "[diabetes_impact_checkx(health_aspects=['心血管'])]",
        False,
        "function_mismatch",
    ),
    (
        "en",
        "normal_atom_bool_0",
        "negated_value",
        "[ProteinRichMealPlanner_generateList(meal_type=-5, include_vegetarian_options=True, cuisine_preference='Asian')]",
        False,
        "type_error",
    ),
    (
        "zh",
        "normal_multi_turn_user_adjust_0_1",
        "nested_call",
        "[Alert_System(entry_id=inner(x=1), suspicion_level=8)]",
        False,
        "type_error",
    ),
    (
        "en",
        "normal_atom_list_0",
        "newlines_tabs",
        "[DisneyRides_recommendForKids(kidsAges = ['5', '7'],\n\tinterests = 'space themes',\n\tparkArea = 'Tomorrowland',\n\tdayOfWeek = 'Sunday')]",
        True,
        "",
    ),
    (
        "en",
        "normal_atom_object_deep_1",
        "no_params",
        "[dataSyncQueryService_performQuery()]",
        False,
        "wrong_param",
    ),
    (
        "en",
        "normal_atom_bool_1",
        "numbers_as_floats",
        "[SolarNanoMaterialInsights(region_focus='Europe')]",
        True,
        "",
    ),
    (
        "en",
        "normal_multi_turn_user_adjust_0_1",
        "numbers_as_strings",
        "[branding_evaluateMediaEngagement(pressReleaseId='12345', metrics=[{'type': 'views', 'value': '5000'}, {'type': 'shares', 'value': '300'}])]",
        True,
        "",
    ),
    (
        "en",
        "normal_atom_bool_0",
        "outer_whitespace",
        "  \n[ProteinRichMealPlanner_generateList(meal_type='dinner', include_vegetarian_options=True, cuisine_preference='Asian')]\n\t ",
        True,
        "",
    ),
    (
        "en",
        "normal_multi_turn_user_adjust_0_0",
        "positional_arg",
        "[branding_createPressRelease('Revolutionary New Product Launch', content='We are excited to launch our new product that will change the industry standards', author='John Doe', publishDate='2023-08-01 10:00')]",
        False,
        "lack_args",
    ),
    (
        "zh",
        "normal_atom_object_deep_0",
        "prefix_only:image_input",
        "[artistic_style_transformer(image_input='/images/my_', style_parameters={'style_type': 'Cubism', 'color_palette': {'primary_colors': ['blue', 'white'], 'accent_colors': ['red']}, 'texture_mapping': True})]",
        False,
        "value_error:string",
    ),
    (
        "zh",
        "normal_atom_list_0",
        "prose_prefix",
        "Sure, here it is: [BlockchainPolicy_compareRegulations(countries=['德国', '美国', '日本'])]",
        False,
        "wrong_output_format",
    ),
    (
        "zh",
        "normal_similar_api_0",
        "punct_strings",
        "[brand_sustainability_jya(brand_name='Jya.', areas_of_interest=['能源效率.'])]",
        True,
        "",
    ),
    (
        "zh",
        "normal_atom_bool_0",
        "spaced_strings",
        "[antique_value_assessment(photo_url='h t t p : / / e x a m p l e . c o m / a n t i q u e . j p g', detailed_report=True)]",
        True,
        "",
    ),
    (
        "zh",
        "normal_similar_api_0",
        "substring_extra:brand_name",
        "[brand_sustainability_jya(brand_name='Jya and more', areas_of_interest=['能源效率'])]",
        True,
        "",
    ),
    (
        "en",
        "normal_atom_object_deep_0",
        "tuple_wrapped",
        "(partner_assessment_evaluate_operational_efficiency(partner_id='TP-12345', evaluation_criteria={'metrics': ['time savings', 'cost reduction'], 'time_frame': 'Last Quarter'}),)",
        False,
        "value_error",
    ),
    (
        "en",
        "normal_similar_api_1",
        "unicode_space",
        "[carbon_action_query(related_sectors\xa0=\xa0['energy'])]",
        True,
        "",
    ),
    (
        "en",
        "normal_atom_list_1",
        "upper_strings",
        "[CalligraphyExhibition_findExhibitions(city='NEW YORK', dateRange=['2023-06-01', '2023-06-30'])]",
        True,
        "",
    ),
    (
        "en",
        "normal_atom_bool_1",
        "wrong_function",
        "[geo.location_search(region_focus='Europe')]",
        False,
        "function_mismatch",
    ),
    (
        "en",
        "normal_atom_list_1",
        "wrong_type:dateRange",
        "[CalligraphyExhibition_findExhibitions(city='New York', dateRange='2023-06-01,2023-06-30')]",
        False,
        "type_error",
    ),
    (
        "zh",
        "normal_atom_list_1",
        "wrong_value:timeFrame",
        "[InternetUsage_compareTrends(countries=['美国', '中国'], metrics=['互联网普及率', '政治活跃度'], timeFrame='qqqzzz')]",
        False,
        "value_error:string",
    ),
    (
        "en",
        "special_error_param_1",
        "answer_dump",
        '{"publication_date": ["12-Feb-2021"]}',
        False,
        "error_detection",
    ),
    ("zh", "special_irrelevant_0", "empty", "", False, "error_detection"),
    (
        "zh",
        "special_incomplete_0",
        "gt",
        '["Missing necessary parameters (schedule, participants) for the api (auctionEventPlanner)"]',
        True,
        "",
    ),
    (
        "zh",
        "special_error_param_0",
        "lower_phrase",
        '["there is incorrect value (10点到16点) for the parameters (time_range) in the conversation history."]',
        False,
        "error_detection",
    ),
    (
        "zh",
        "special_error_param_0",
        "missing_name",
        '["There is incorrect value (10点到16点) for the parameters (xx) in the conversation history."]',
        True,
        "",
    ),
    (
        "zh",
        "special_error_param_1",
        "missing_value:Magic@John",
        '["There is incorrect value (yy) for the parameters (instructor_name) in the conversation history."]',
        False,
        "error_correction",
    ),
    (
        "en",
        "special_irrelevant_1",
        "no_phrase",
        '["Due to , I cannot solve this problem."]',
        False,
        "error_detection",
    ),
    ("zh", "special_error_param_1", "only_phrase", "There is incorrect value", False, "error_correction"),
    (
        "zh",
        "special_incomplete_0",
        "upper_phrase",
        '["MISSING NECESSARY PARAMETERS (schedule, participants) for the api (auctionEventPlanner)"]',
        False,
        "error_detection",
    ),
    (
        "zh",
        "special_error_param_1",
        "whitespace_collapsed",
        '["Thereisincorrectvalue(Magic@John)fortheparameters(instructor_name)intheconversationhistory."]',
        False,
        "error_detection",
    ),
]


@pytest.mark.parametrize("language, entry_id, label, output, valid, error_type", NORMAL_AND_SPECIAL)
def test_normal_and_special_verdicts_match_the_official_ones(
    language, entry_id, label, output, valid, error_type
):
    v = verdict(_entry(language, entry_id), {"id": entry_id, "result": output})
    assert (v.valid, v.error_type) == (valid, error_type), label


def _agent_case(entry, label):
    """(states, process) of the agent mutation ``label``, as the agreement check built it."""
    return next((states, process) for name, states, process in agent_cases(entry) if name == label)


# (language, entry id, mutation, official valid, official error_type, official process accuracy)
AGENT = [
    ("en", "agent_multi_step_1", "gt", False, "class attributes wrong", 1.0),
    ("en", "agent_multi_step_1", "half_milestones", False, "class attributes wrong", 0.5),
    ("en", "agent_multi_step_1", "skip_first_milestone", False, "class attributes wrong", 0.0),
    ("en", "agent_multi_step_1", "no_calls", False, "wrong number of class", 0.0),
    ("en", "agent_multi_step_1", "gt_states_reversed_process", False, "class attributes wrong", 0.25),
    ("en", "agent_multi_step_1", "drop_last_class", False, "wrong number of class", 1.0),
    ("en", "agent_multi_turn_0", "gt", True, "", 1.0),
    ("en", "agent_multi_turn_0", "half_milestones", False, "class attributes wrong", 0.5),
    ("en", "agent_multi_turn_0", "gt_states_reversed_process", True, "", 1.0),
    ("en", "agent_multi_turn_0", "changed_attr", False, "class attributes wrong", 1.0),
    ("en", "agent_multi_turn_0", "missing_attr", True, "", 1.0),
    ("en", "agent_multi_turn_0", "extra_attr", False, "class attributes wrong", 1.0),
    ("en", "agent_multi_turn_0", "renamed_class", True, "", 1.0),
    ("en", "agent_multi_turn_0", "states_as_string", False, "wrong number of class", 1.0),
    ("zh", "agent_multi_step_0", "gt", True, "", 1.0),
    ("zh", "agent_multi_step_0", "half_milestones", False, "class attributes wrong", 0.333),
    ("zh", "agent_multi_step_0", "no_calls", False, "wrong number of class", 0.0),
    ("zh", "agent_multi_step_0", "changed_attr", False, "class attributes wrong", 1.0),
    ("zh", "agent_multi_turn_1", "half_milestones", False, "class attributes wrong", 0.4),
    ("zh", "agent_multi_turn_1", "skip_first_milestone", False, "class attributes wrong", 0.0),
]


@pytest.mark.parametrize("language, entry_id, label, valid, error_type, process", AGENT)
def test_agent_verdicts_match_the_official_ones(language, entry_id, label, valid, error_type, process):
    entry = _entry(language, entry_id)
    states, proc = _agent_case(entry, label)
    v = verdict(entry, {"id": entry_id, "result": states, "process": proc})
    # upstream reports the process accuracy rounded to 3 places
    assert (v.valid, v.error_type, round(v.process, 3)) == (valid, error_type, process), label
