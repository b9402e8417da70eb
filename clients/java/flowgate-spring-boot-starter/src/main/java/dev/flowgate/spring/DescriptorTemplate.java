package dev.flowgate.spring;

import dev.flowgate.client.Descriptor;
import java.util.ArrayList;
import java.util.List;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.ExpressionParser;
import org.springframework.expression.ParseException;
import org.springframework.expression.ParserContext;
import org.springframework.expression.spel.standard.SpelExpressionParser;

/**
 * One descriptor of an annotation, parsed once: its entries' keys, and each value as a SpEL
 * template ({@code "#{#p.channel}"}, or a literal). The entries are split at the commas and
 * equals signs outside {@code #{...}} before anything is evaluated, so that an evaluated value
 * holding either cannot change the descriptor's shape.
 */
final class DescriptorTemplate {
  static final ExpressionParser PARSER = new SpelExpressionParser();

  private final String source;
  private final List<String> keys;
  private final List<Expression> values;

  private DescriptorTemplate(String source, List<String> keys, List<Expression> values) {
    this.source = source;
    this.keys = keys;
    this.values = values;
  }

  /**
   * Parses {@code "biz=PAY, channel=#{#p.channel}"}.
   *
   * @param source the annotation's string
   * @return the template
   * @throws IllegalArgumentException naming what is wrong
   */
  static DescriptorTemplate parse(String source) {
    List<String> keys = new ArrayList<>();
    List<Expression> values = new ArrayList<>();
    for (String entry : splitTopLevel(source, ',')) {
      String trimmed = entry.strip();
      int eq = indexTopLevel(trimmed, '=');
      String key = (eq < 0 ? trimmed : trimmed.substring(0, eq)).strip();
      String value = eq < 0 ? "" : trimmed.substring(eq + 1).strip();
      if (key.isEmpty() || key.contains("#{")) {
        throw new IllegalArgumentException(
            "descriptor \"" + source + "\": each entry is key=value, with a literal key");
      }
      keys.add(key);
      values.add(template(value, "descriptor \"" + source + "\""));
    }
    return new DescriptorTemplate(source, List.copyOf(keys), List.copyOf(values));
  }

  /** A SpEL template ({@code "#{...}"} parts evaluated, the rest literal). */
  static Expression template(String text, String where) {
    try {
      return PARSER.parseExpression(text, ParserContext.TEMPLATE_EXPRESSION);
    } catch (ParseException e) {
      throw new IllegalArgumentException(where + ": " + e.getMessage(), e);
    }
  }

  /**
   * The descriptor of one call.
   *
   * @param context the call's arguments, by name
   * @return the descriptor
   * @throws IllegalArgumentException when a value cannot be evaluated or is null
   */
  Descriptor evaluate(EvaluationContext context) {
    List<Descriptor.Entry> list = new ArrayList<>(keys.size());
    for (int i = 0; i < keys.size(); i++) {
      Object value;
      try {
        value = values.get(i).getValue(context);
      } catch (EvaluationException e) {
        throw new IllegalArgumentException(
            "descriptor \"" + source + "\": " + keys.get(i) + ": " + e.getMessage(), e);
      }
      if (value == null) {
        throw new IllegalArgumentException(
            "descriptor \""
                + source
                + "\": the value of "
                + keys.get(i)
                + " is null (naming a parameter, #p, needs the code compiled with -parameters;"
                + " #p0 names the first by position)");
      }
      list.add(new Descriptor.Entry(keys.get(i), value.toString()));
    }
    return new Descriptor(list, null);
  }

  private static List<String> splitTopLevel(String s, char separator) {
    List<String> out = new ArrayList<>();
    int start = 0;
    int depth = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '#' && i + 1 < s.length() && s.charAt(i + 1) == '{') {
        depth++;
        i++;
      } else if (depth > 0 && c == '{') {
        depth++;
      } else if (depth > 0 && c == '}') {
        depth--;
      } else if (depth == 0 && c == separator) {
        out.add(s.substring(start, i));
        start = i + 1;
      }
    }
    out.add(s.substring(start));
    return out;
  }

  private static int indexTopLevel(String s, char wanted) {
    List<String> parts = splitTopLevel(s, wanted);
    return parts.size() == 1 ? -1 : parts.get(0).length();
  }
}
