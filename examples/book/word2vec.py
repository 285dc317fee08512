# ruff: noqa: UP010, UP030, UP031, UP032, B007, RUF059, RUF100, SIM113, SIM117  (the style of Fluid 1.5 scripts)
"""Paddle book chapter 4, word2vec: an N-gram neural language model (four
embeddings sharing one table, a hidden layer, softmax over the dictionary) on the
PTB corpus, written as for Fluid 1.5. Only the imports differ from a Paddle script
(``paddle`` is fluid-hw's ``paddle_compat``, whose ``dataset.imikolov`` is a small
synthetic stand-in).

    python examples/book/word2vec.py --num_epochs 1
"""

from __future__ import print_function

import argparse
import math
import sys

import numpy

import fluid_hw as fluid
import fluid_hw.paddle_compat as paddle

EMBED_SIZE = 32
HIDDEN_SIZE = 256
N = 5
BATCH_SIZE = 100

word_dict = paddle.dataset.imikolov.build_dict()
dict_size = len(word_dict)


def inference_program(words, is_sparse):
    embeds = [
        fluid.layers.embedding(input=w, size=[dict_size, EMBED_SIZE], dtype='float32',
                               is_sparse=is_sparse, param_attr='shared_w')
        for w in words[:4]
    ]
    concat_embed = fluid.layers.concat(input=embeds, axis=1)
    hidden1 = fluid.layers.fc(input=concat_embed, size=HIDDEN_SIZE, act='sigmoid')
    predict_word = fluid.layers.fc(input=hidden1, size=dict_size, act='softmax')
    return predict_word


def train_program(predict_word):
    # 'nextw' was declared with the other words, before inference_program, so the
    # data order is [firstw, secondw, thirdw, fourthw, nextw]; declaring it again
    # returns that variable.
    next_word = fluid.layers.data(name='nextw', shape=[1], dtype='int64')
    cost = fluid.layers.cross_entropy(input=predict_word, label=next_word)
    avg_cost = fluid.layers.mean(cost)
    return avg_cost


def optimizer_func():
    return fluid.optimizer.AdagradOptimizer(
        learning_rate=3e-3,
        regularization=fluid.regularizer.L2DecayRegularizer(8e-4))


def train(if_use_cuda, params_dirname, is_sparse=True, num_epochs=100, max_steps=None,
          seed=None, optimizer=None):
    """Train; return the training losses, one per step."""
    place = fluid.CUDAPlace(0) if if_use_cuda else fluid.CPUPlace()
    train_reader = paddle.batch(paddle.dataset.imikolov.train(word_dict, N), BATCH_SIZE)

    first_word = fluid.layers.data(name='firstw', shape=[1], dtype='int64')
    second_word = fluid.layers.data(name='secondw', shape=[1], dtype='int64')
    third_word = fluid.layers.data(name='thirdw', shape=[1], dtype='int64')
    forth_word = fluid.layers.data(name='fourthw', shape=[1], dtype='int64')
    next_word = fluid.layers.data(name='nextw', shape=[1], dtype='int64')

    word_list = [first_word, second_word, third_word, forth_word, next_word]
    feed_order = ['firstw', 'secondw', 'thirdw', 'fourthw', 'nextw']

    main_program = fluid.default_main_program()
    star_program = fluid.default_startup_program()
    if seed is not None:
        main_program.random_seed = seed
        star_program.random_seed = seed

    predict_word = inference_program(word_list, is_sparse)
    avg_cost = train_program(predict_word)

    sgd_optimizer = optimizer or optimizer_func()
    sgd_optimizer.minimize(avg_cost)

    exe = fluid.Executor(place)
    feed_var_list_loop = [main_program.global_block().var(name) for name in feed_order]
    feeder = fluid.DataFeeder(feed_list=feed_var_list_loop, place=place)
    exe.run(star_program)

    losses = []
    step = 0
    for pass_id in range(num_epochs):
        for data in train_reader():
            avg_cost_np = exe.run(main_program, feed=feeder.feed(data),
                                  fetch_list=[avg_cost])
            losses.append(float(avg_cost_np[0][0]))
            if step % 10 == 0:
                print("Step %d: Average Cost %f" % (step, avg_cost_np[0][0]))
            step += 1
            if math.isnan(float(avg_cost_np[0][0])):
                sys.exit("got NaN loss, training failed.")
            if max_steps is not None and step >= max_steps:
                break
        if max_steps is not None and step >= max_steps:
            break
    if params_dirname is not None:
        fluid.io.save_inference_model(params_dirname,
                                      ['firstw', 'secondw', 'thirdw', 'fourthw'],
                                      [predict_word], exe)
    return losses


def infer(use_cuda, params_dirname=None):
    """Load the saved inference model; return the next-word probabilities after a
    few 4-word test contexts and the true next words."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inferencer, feed_target_names,
         fetch_targets] = fluid.io.load_inference_model(params_dirname, exe)
        grams = list(paddle.reader.firstn(paddle.dataset.imikolov.test(word_dict, N), 8)())
        # One word per sequence: each input is a LoDTensor of lod level 1 with
        # sequences of length 1, as the book feeds them.
        lod = [[1] * len(grams)]
        feed = {
            name: fluid.create_lod_tensor(
                numpy.array([[g[i]] for g in grams], dtype='int64'), lod, place)
            for i, name in enumerate(feed_target_names)
        }
        results = exe.run(inferencer, feed=feed, fetch_list=fetch_targets,
                          return_numpy=False)
        probs = numpy.array(results[0])
        most_possible_word_index = numpy.argmax(probs[0])
        print("Most possible next word of the first context: %d" % most_possible_word_index)
    return probs, numpy.array([g[4] for g in grams])


def main(use_cuda, is_sparse, num_epochs):
    params_dirname = "word2vec.inference.model"
    train(if_use_cuda=use_cuda, params_dirname=params_dirname, is_sparse=is_sparse,
          num_epochs=num_epochs)
    infer(use_cuda=use_cuda, params_dirname=params_dirname)


if __name__ == '__main__':
    parser = argparse.ArgumentParser("word2vec")
    parser.add_argument('--use_gpu', type=int, default=0)
    parser.add_argument('--num_epochs', type=int, default=100)
    args = parser.parse_args()
    main(use_cuda=args.use_gpu, is_sparse=True, num_epochs=args.num_epochs)
